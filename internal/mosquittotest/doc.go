// Package mosquittotest finds the Mosquitto broker the MQTT tests run
// against (a real one: Debian's mosquitto package) and picks free loopback
// ports for it. Tests only.
package mosquittotest
