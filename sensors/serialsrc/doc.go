// Package serialsrc reads serial sensors (GPS, IMU, custom MCUs) with
// go.bug.st/serial and turns what they send into sensors.Sample values,
// timestamped on CLOCK_MONOTONIC when they arrive.
//
// # Protocols
//
//   - "nmea": NMEA 0183 sentences from a GPS. GGA and RMC of any talker
//     (GP, GN, GL, ...) are parsed after the checksum is verified; other
//     sentences are counted as ignored. Latitude and longitude are signed
//     decimal degrees, speed is metres per second; an empty field is NaN.
//   - "csv": one line per sample of comma-separated numbers whose column
//     names are configured (e.g. "ax,ay,az,gx,gy,gz"). Lines starting with
//     a letter or '#' (headers, comments) are ignored.
//   - "cobs": binary packets, each COBS(payload ‖ CRC-32C(payload)) followed
//     by a 0x00 delimiter, where payload is little-endian float32 values
//     and the CRC (Castagnoli, little-endian) is computed before stuffing.
//     [AppendPacket] builds one, for tests and firmware authors.
//
// The parsers ([ParseNMEA], [ParseCSV], [ParsePacket], [DecodeCOBS]) are
// pure functions that allocate nothing and return sentinel errors; each has
// a fuzz target.
//
// # Robustness
//
// One reader goroutine per port, owned by the Source: it frames bytes into
// a bounded buffer (an overlong line or packet is dropped and counted, the
// framer resynchronises on the next delimiter), parses, and hands samples to
// Next through a bounded queue that drops the oldest sample when the
// consumer lags. go.bug.st/serial returns (0, nil) when a read times out;
// that is counted as an idle period, not an error. When the device goes
// away (hang-up, EIO, unplugged USB adapter) Next returns an error wrapping
// sensors.ErrDeviceGone; the owner Closes the source and Starts it again,
// which reopens the configured path, so configure a stable name such as
// /dev/serial/by-id/usb-...-if00-port0.
package serialsrc
