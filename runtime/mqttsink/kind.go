package mqttsink

// Kind is the sink kind this package is: [[sink]] kind = "mqtt".
const Kind = "mqtt"
