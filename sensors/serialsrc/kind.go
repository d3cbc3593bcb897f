package serialsrc

// Kind is the source kind this package is: [[source]] kind = "serial".
const Kind = "serial"
