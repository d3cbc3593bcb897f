package serialsink

// Kind is the sink kind this package is: [[sink]] kind = "serial".
const Kind = "serial"
