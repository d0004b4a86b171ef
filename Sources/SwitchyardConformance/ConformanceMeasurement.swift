/// One value a scenario measured on its run: how long a stall took to detect, how many
/// bytes a reader held, how many changes a monitor reported.
///
/// Scenarios record them with ``ConformanceContext/record(_:_:)`` (and its `bytes:` and
/// `count:` forms); the runner collects them per run into the ``ConformanceOutcome``, and
/// the report shows them beside the scenario's result. A run may record one name more
/// than once (a monitor's report before and after a link returns); each value is kept,
/// in the order recorded.
public struct ConformanceMeasurement: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A unit of ``value``: extensible, encoded as its raw string (`"ms"`, `"bytes"`, `"count"`).
    public struct Unit: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String

        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// Milliseconds of wall-clock time.
        public static let milliseconds = Unit(rawValue: "ms")
        /// Bytes.
        public static let bytes = Unit(rawValue: "bytes")
        /// A plain count of things.
        public static let count = Unit(rawValue: "count")

        public var description: String { rawValue }
    }

    /// What was measured, short enough for a table cell: `"refused"`, `"data in flight"`.
    public var name: String
    /// The value, in ``unit``.
    public var value: Double
    /// The unit of ``value``.
    public var unit: Unit

    public init(_ name: String, value: Double, unit: Unit) {
        self.name = name
        self.value = value
        self.unit = unit
    }

    /// A duration, kept in milliseconds.
    public init(_ name: String, _ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(name, value: Double(seconds) * 1000 + Double(attoseconds) / 1e15, unit: .milliseconds)
    }

    /// A number of bytes.
    public init(_ name: String, bytes: Int) {
        self.init(name, value: Double(bytes), unit: .bytes)
    }

    /// A count of things.
    public init(_ name: String, count: Int) {
        self.init(name, value: Double(count), unit: .count)
    }

    /// The value with its unit, for people: `2012 ms`, `2.3 ms`, `0.04 ms`, `131 KiB`, `2`.
    public var formattedValue: String {
        switch unit {
        case .milliseconds:
            return "\(decimal(value, places: abs(value) < 1 ? 2 : abs(value) < 10 ? 1 : 0)) ms"
        case .bytes:
            let magnitude = abs(value)
            if magnitude < 1024 { return "\(decimal(value, places: 0)) B" }
            if magnitude < 1024 * 1024 {
                let kibibytes = value / 1024
                return "\(decimal(kibibytes, places: abs(kibibytes) < 10 ? 1 : 0)) KiB"
            }
            let mebibytes = value / (1024 * 1024)
            return "\(decimal(mebibytes, places: abs(mebibytes) < 10 ? 1 : 0)) MiB"
        case .count:
            return decimal(value, places: 0)
        default:
            return "\(decimal(value, places: value.rounded() == value ? 0 : 2)) \(unit.rawValue)"
        }
    }

    /// `name value`, for example `refused 0.1 ms`.
    public var description: String { "\(name) \(formattedValue)" }
}

/// `value` rounded to `places` decimals, without Foundation's formatters.
func decimal(_ value: Double, places: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    let sign = value < 0 && scaled > 0 ? "-" : ""
    guard scaled < 1e18 else { return "\(value)" }
    let whole = Int64(scaled)
    let divisor = Int64(scale)
    let integer = whole / divisor
    guard places > 0 else { return "\(sign)\(integer)" }
    var fraction = String(whole % divisor)
    while fraction.count < places { fraction = "0" + fraction }
    return "\(sign)\(integer).\(fraction)"
}

/// A short measurement name for what a scenario's helper calls a call: `the call with
/// data in flight` → `data in flight`, `the call awaiting a reply` → `awaiting a reply`,
/// `the open call` → `open call`.
func measurementName(for what: String) -> String {
    for prefix in ["the call with ", "the call ", "the "] where what.hasPrefix(prefix) {
        return String(what.dropFirst(prefix.count))
    }
    return what
}
