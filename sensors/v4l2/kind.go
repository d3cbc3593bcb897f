package v4l2

// Kind is the source kind this package is: [[source]] kind = "v4l2".
const Kind = "v4l2"
