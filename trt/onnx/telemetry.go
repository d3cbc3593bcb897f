package onnx

import (
	"fmt"
	"os"
)

// ONNX Runtime 1.30's Linux build carries Microsoft's 1DS telemetry
// uploader. Unless it is switched off before the library creates its
// environment, every process that loads it writes a device id and an
// SQLite event store under $XDG_CACHE_HOME (else ~/.cache)
// /Microsoft/DeveloperTools/.onnxruntime/, an empty mat-debug-<pid>.log
// and a .ses file in $TMPDIR (else /tmp), and about ten seconds later
// looks up mobile.events.data.microsoft.com over DNS to upload events.
//
// What the library honours, measured with strace on 1.30.0 for 25 s
// (docs/OPERATIONS.md, "Nothing leaves the device"):
//
//   - ORT_DISABLE_TELEMETRY=1 (also true, yes, on, y) in the environment
//     when the environment is created: no files, no lookup. This is the
//     switch edged sets.
//   - the C API's DisableTelemetryEvents, after the environment exists:
//     the uploader is already running; the files are written and the
//     lookup happens all the same. edged calls it too, so that a future
//     library that ignored the variable would at least send no events.
//   - ORT_TELEMETRY_DISABLED (read by some upstream versions): ignored by
//     1.30.
//   - CI=true and the other CI-runner variables: they switch it off too,
//     which is why a test that checks the switch removes them first.

// EnvDisableTelemetry is the environment variable that switches ONNX
// Runtime's telemetry off before the library initialises.
const EnvDisableTelemetry = "ORT_DISABLE_TELEMETRY"

// CIVariables are the environment variables ONNX Runtime 1.30 reads as
// "running in CI", which also switch its telemetry off. Tests that check
// edged's own switch remove them from the child's environment.
var CIVariables = []string{"CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
	"CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER",
	"SYSTEM_TEAMFOUNDATIONCOLLECTIONURI"}

// The switch is set when the package is initialised, before main runs and
// before any C thread exists (setenv racing a getenv on another thread is
// undefined in C), so every program that links the loader — edged run,
// edged check, every test binary — has it before ONNX Runtime can be
// loaded. A value the user set (0 included) is overridden: edged offers
// no way to turn the telemetry on.
func init() {
	if err := telemetryOff(); err != nil {
		panic(err)
	}
}

// telemetryOff sets EnvDisableTelemetry=1 unless it already is; New calls
// it again just before loading the library, in case something changed the
// environment since.
func telemetryOff() error {
	if os.Getenv(EnvDisableTelemetry) == "1" {
		return nil
	}
	if err := os.Setenv(EnvDisableTelemetry, "1"); err != nil {
		return fmt.Errorf("onnx: cannot switch ONNX Runtime's telemetry off (%s=1): %w", EnvDisableTelemetry, err)
	}
	return nil
}
