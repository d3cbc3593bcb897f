package socketsink

// Kind is the sink kind this package is: [[sink]] kind = "socket".
const Kind = "socket"
