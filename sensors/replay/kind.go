package replay

// Kind is the source kind this package is: [[source]] kind = "replay".
const Kind = "replay"
