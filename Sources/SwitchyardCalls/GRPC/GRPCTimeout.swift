/// A call's `grpc-timeout` header: an amount of 1 to 8 ASCII digits and a unit letter
/// (`H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds,
/// `n` nanoseconds), gRPC's PROTOCOL-HTTP2 "Timeout".
///
/// The client sends the time left until its deadline; the server takes the call's
/// deadline as that much after the headers arrived. Parsing is strict: anything but
/// 1 to 8 digits and one unit letter is no timeout (``init(parsing:)`` returns nil; the
/// request rules then fail the call `internal`, as grpc-go does for a malformed
/// `grpc-timeout`). A zero amount is parsed (an expired deadline) though the spec asks
/// for a positive one; it is never sent.
package struct GRPCTimeout: Sendable, Hashable, CustomStringConvertible {
    /// A unit, as its letter on the wire.
    package enum Unit: UInt8, Sendable, CaseIterable {
        case hours = 0x48  // H
        case minutes = 0x4D  // M
        case seconds = 0x53  // S
        case milliseconds = 0x6D  // m
        case microseconds = 0x75  // u
        case nanoseconds = 0x6E  // n

        /// The unit's length in nanoseconds.
        var nanoseconds: Int64 {
            switch self {
            case .hours: 3_600_000_000_000
            case .minutes: 60_000_000_000
            case .seconds: 1_000_000_000
            case .milliseconds: 1_000_000
            case .microseconds: 1_000
            case .nanoseconds: 1
            }
        }
    }

    /// The largest amount: 8 digits.
    package static let maximumAmount = 99_999_999

    /// 0 to ``maximumAmount``.
    package let amount: Int
    package let unit: Unit

    /// A timeout of `amount` `unit`s, or nil when `amount` is not 0 to ``maximumAmount``.
    package init?(amount: Int, unit: Unit) {
        guard (0...Self.maximumAmount).contains(amount) else { return nil }
        self.amount = amount
        self.unit = unit
    }

    /// The timeout a `grpc-timeout` value spells, or nil unless it is 1 to 8 ASCII
    /// digits followed by one unit letter (no sign, no spaces).
    package init?(parsing value: some Collection<UInt8>) {
        let value = Array(value)
        guard (2...9).contains(value.count), let last = value.last, let unit = Unit(rawValue: last) else { return nil }
        var amount = 0
        for byte in value.dropLast() {
            guard (0x30...0x39).contains(byte) else { return nil }
            amount = amount * 10 + Int(byte - 0x30)
        }
        self.amount = amount
        self.unit = unit
    }

    /// The timeout to send for `duration`: exact when some unit holds it in 8 digits
    /// (then the coarsest such unit, the shortest text: one second is `1S`, not
    /// `1000m`), else rounded up in the finest unit that holds it in 8 digits (the
    /// deadline is never made earlier). A duration of zero or less is `1n` (gRPC asks for
    /// a positive amount); one past 99,999,999 hours is `99999999H`. Parts of a
    /// nanosecond round up.
    package init(rounding duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int128(seconds) * 1_000_000_000 + Int128((attoseconds + 999_999_999) / 1_000_000_000)
        guard nanoseconds > 0 else {
            self.amount = 1
            self.unit = .nanoseconds
            return
        }
        let maximum = Int128(Self.maximumAmount)
        // Coarsest first: the first exact fit has the fewest digits.
        for unit in Unit.allCases {
            let size = Int128(unit.nanoseconds)
            if nanoseconds % size == 0, nanoseconds / size <= maximum {
                self.amount = Int(nanoseconds / size)
                self.unit = unit
                return
            }
        }
        // Finest first: the first that holds the rounded-up amount rounds up the least.
        for unit in Unit.allCases.reversed() {
            let size = Int128(unit.nanoseconds)
            let rounded = (nanoseconds + size - 1) / size
            if rounded <= maximum {
                self.amount = Int(rounded)
                self.unit = unit
                return
            }
        }
        self.amount = Self.maximumAmount
        self.unit = .hours
    }

    /// The time it spells.
    package var duration: Duration {
        .nanoseconds(Int64(amount)) * Int(unit.nanoseconds)
    }

    /// The header's value: the amount in decimal, then the unit letter.
    package var encoded: [UInt8] {
        Array(String(amount).utf8) + [unit.rawValue]
    }

    package var description: String { String(decoding: encoded, as: UTF8.self) }
}
