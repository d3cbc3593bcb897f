package synthetic

// Kind is the source kind this package is: [[source]] kind = "synthetic".
const Kind = "synthetic"
