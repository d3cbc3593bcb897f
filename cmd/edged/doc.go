// Command edged is the edge inference daemon and its command-line tools.
//
//	edged [run] [-config FILE]      run the daemon (default subcommand)
//	edged check [-config FILE]      validate the configuration, probe devices and engines
//	edged tail [-socket PATH] [-n N] [-json]   print results from a running daemon
//	edged reload [-socket PATH]     ask a running daemon to re-check its engine files
//	edged config print [-config FILE]          print the effective configuration
//	edged demo-model -o FILE [-variant N]      write the built-in demo model (ONNX)
//	edged version
//
// Exit status: 0 clean stop, 1 runtime failure, 78 (EX_CONFIG) bad configuration.
package main
