package rtsptest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// NetnsChild is set in the environment of a test binary that
// RunInLossyNetns re-ran inside its network namespace.
const NetnsChild = "EDGED_RTSPTEST_NETNS"

var netnsSeq atomic.Int32

// InNetns reports whether this process is the re-run inside a namespace.
func InNetns() bool { return os.Getenv(NetnsChild) != "" }

// RunInLossyNetns re-runs the test binary's tests matching run inside a
// new network namespace (loopback only) whose input hook drops permille/1000
// of the UDP datagrams to ports 1024-65535 (RTP and RTCP both ways; RTSP
// over TCP untouched), since this kernel has no netem. Server and client
// must both run in the re-run. It fails the test when the re-run fails,
// logs its output, and returns how many datagrams nftables dropped. It
// needs root, ip and nft: without them it skips, unless
// EDGED_REQUIRE_NETNS=1 makes that a failure. Under qemu (EDGED_EXEC_WRAPPER)
// it skips: the re-run would need the wrapper inside the namespace.
func RunInLossyNetns(t *testing.T, permille int, run string) (dropped int) {
	t.Helper()
	skip := func(why string) {
		if os.Getenv("EDGED_REQUIRE_NETNS") == "1" {
			t.Fatalf("%s, and EDGED_REQUIRE_NETNS=1", why)
		}
		t.Skipf("%s (EDGED_REQUIRE_NETNS=1 makes this a failure)", why)
	}
	if os.Geteuid() != 0 {
		skip("network namespaces need root")
	}
	if os.Getenv("EDGED_EXEC_WRAPPER") != "" {
		t.Skip("under an exec wrapper (qemu): the re-run inside the namespace would need it")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip(tool + " not found (apt-get install iproute2 nftables)")
		}
	}
	ns := fmt.Sprintf("edged-rtsp-%d-%d", os.Getpid(), netnsSeq.Add(1))
	sh := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := sh("", "ip", "netns", "add", ns); err != nil {
		skip(fmt.Sprintf("ip netns add: %v: %s", err, out))
	}
	t.Cleanup(func() { sh("", "ip", "netns", "del", ns) })
	if out, err := sh("", "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	rules := fmt.Sprintf(`table inet loss {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 1024-65535 numgen random mod 1000 < %d counter drop
  }
}
`, permille)
	if out, err := sh(rules, "ip", "netns", "exec", ns, "nft", "-f", "-"); err != nil {
		skip(fmt.Sprintf("nft in the namespace: %v: %s", err, out))
	}
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), NetnsChild+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("inside namespace %s (%d‰ UDP loss):\n%s", ns, permille, out)
	if err != nil {
		t.Fatalf("the run inside the namespace failed: %v", err)
	}
	if strings.Contains(string(out), "--- SKIP") && !strings.Contains(string(out), "--- PASS") {
		t.Skip("the run inside the namespace skipped (its output above says why)")
	}
	list, err := sh("", "ip", "netns", "exec", ns, "nft", "list", "chain", "inet", "loss", "input")
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, list)
	}
	if m := regexp.MustCompile(`counter packets (\d+)`).FindStringSubmatch(list); m != nil {
		dropped, _ = strconv.Atoi(m[1])
	}
	return dropped
}
