// echo-client --json: the run's report as one JSON object, for machines.
//
// The schema (version 1). One object on standard output, followed by a newline, and
// nothing else on standard output: progress, errors and the lines --reconnect prints go
// to standard error. Printed at the end of every run that started
// (also one that failed: then "ok" is false and "failure" says why; the exit status is 1
// as without --json). Bad arguments exit 64 with no object.
//
//     {
//       "schemaVersion": 1,
//       "ok": true,                      // false: an error or a wrong echo ended the run
//       "failure": "connection 0, ...",  // only when ok is false
//       "backend": "bsd",
//       "mode": "raw",                   // or "framed"
//       "flowControl": "off",            // framed only: "on" or "off"
//       "endpoint": "127.0.0.1:7007",
//       "connections": 4,
//       "messagesPerConnection": 1000,
//       "messageSizeBytes": 64,
//       "messages": 4000,                // round trips done (all of them when ok)
//       "bytes": 256000,                 // echoed bytes: messages x messageSizeBytes
//       "durationSeconds": 0.52,
//       "messagesPerSecond": 7692.3,
//       "throughputMiBPerSecond": 0.47,  // echoed bytes
//       "latency": {                     // round trips, from an HdrHistogram (3 digits)
//         "p50Microseconds": 61.4, "p90Microseconds": 80.1, "p99Microseconds": 120.3,
//         "p999Microseconds": 410.6, "maxMicroseconds": 1203.9
//       },
//       "errors": {"unavailable": 2},    // by TransportError code; "badEcho": a wrong echo
//       "errorCount": 2,
//       "reconnects": 2,                 // only with --reconnect
//       "tls": false                     // true with --tls (then "backend" is the one under TLS)
//     }
//
// The latency figures are 0 when no round trip was done.

import Switchyard

/// One run's report, written as JSON by hand (the client uses no Foundation).
struct JSONReport {
    var ok: Bool
    var failure: String?
    var backend: String
    var mode: EchoMode
    var flowControl: FlowControlSetting
    var endpoint: String
    var connections: Int
    var messagesPerConnection: Int
    var messageSize: Int
    var messages: Int
    var seconds: Double
    var latency: LatencySummary
    var errors: [String: Int]
    var reconnects: Int?
    var tls: Bool

    var text: String {
        var fields: [String] = [
            "\"schemaVersion\": 1",
            "\"ok\": \(ok)",
        ]
        if let failure { fields.append("\"failure\": \(quoted(failure))") }
        fields += [
            "\"backend\": \(quoted(backend))",
            "\"mode\": \(quoted(mode.rawValue))",
        ]
        if mode == .framed { fields.append("\"flowControl\": \(quoted(flowControl.rawValue))") }
        let bytes = messages * messageSize
        fields += [
            "\"endpoint\": \(quoted(endpoint))",
            "\"connections\": \(connections)",
            "\"messagesPerConnection\": \(messagesPerConnection)",
            "\"messageSizeBytes\": \(messageSize)",
            "\"messages\": \(messages)",
            "\"bytes\": \(bytes)",
            "\"durationSeconds\": \(number(seconds, decimals: 6))",
            "\"messagesPerSecond\": \(number(seconds > 0 ? Double(messages) / seconds : 0, decimals: 1))",
            "\"throughputMiBPerSecond\": \(number(seconds > 0 ? Double(bytes) / seconds / (1024 * 1024) : 0, decimals: 3))",
        ]
        let percentiles = [
            ("p50Microseconds", latency.p50), ("p90Microseconds", latency.p90), ("p99Microseconds", latency.p99),
            ("p999Microseconds", latency.p999), ("maxMicroseconds", latency.max),
        ].map { "\"\($0.0)\": \(number(Double($0.1) / 1000, decimals: 3))" }
        fields.append("\"latency\": {\(percentiles.joined(separator: ", "))}")
        let errorFields = errors.sorted { $0.key < $1.key }.map { "\(quoted($0.key)): \($0.value)" }
        fields.append("\"errors\": {\(errorFields.joined(separator: ", "))}")
        fields.append("\"errorCount\": \(errors.values.reduce(0, +))")
        if let reconnects { fields.append("\"reconnects\": \(reconnects)") }
        fields.append("\"tls\": \(tls)")
        return "{\(fields.joined(separator: ", "))}"
    }

    /// A finite number in JSON (which has no NaN or infinity: those become 0).
    private func number(_ value: Double, decimals: Int) -> String {
        value.isFinite ? format(value, decimals: decimals) : "0"
    }
}

/// `text` as a JSON string: quotes, backslashes and control characters escaped.
func quoted(_ text: String) -> String {
    var result = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": result += "\\\""
        case "\\": result += "\\\\"
        case "\n": result += "\\n"
        case "\r": result += "\\r"
        case "\t": result += "\\t"
        case let c where c.value < 0x20:
            let digits = Array("0123456789abcdef")
            result += "\\u00\(digits[Int(c.value >> 4)])\(digits[Int(c.value & 0xf)])"
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result + "\""
}
