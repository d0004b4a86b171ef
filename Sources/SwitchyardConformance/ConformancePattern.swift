/// Deterministic pseudo-random bytes for payloads, and a byte-exact comparison that
/// says where two payloads first differ.
///
/// Payloads are never all zeros: a backend that drops, repeats or reorders a chunk
/// produces a mismatch at a known offset.
public enum ConformancePattern {
    /// `count` bytes from a SplitMix64 stream seeded with `seed`. The same seed always
    /// gives the same bytes.
    public static func bytes(count: Int, seed: UInt64) -> [UInt8] {
        var generator = Generator(seed: seed)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var index = 0
            while index < count {
                var word = generator.next()
                let take = min(8, count - index)
                for offset in 0..<take {
                    buffer[index + offset] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                }
                index += take
            }
            initialized = count
        }
    }

    /// The offset of the first byte where `received` differs from `expected`, or where
    /// one ends before the other; `nil` when they are equal.
    public static func firstMismatch(_ received: [UInt8], _ expected: [UInt8]) -> Int? {
        let common = min(received.count, expected.count)
        let mismatch: Int? = received.withUnsafeBufferPointer { r in
            expected.withUnsafeBufferPointer { e in
                var index = 0
                // Compare eight bytes at a time; debug builds are slow at byte loops.
                while index + 8 <= common {
                    let a = UnsafeRawPointer(r.baseAddress! + index).loadUnaligned(as: UInt64.self)
                    let b = UnsafeRawPointer(e.baseAddress! + index).loadUnaligned(as: UInt64.self)
                    if a != b { break }
                    index += 8
                }
                while index < common {
                    if r[index] != e[index] { return index }
                    index += 1
                }
                return nil
            }
        }
        if let mismatch { return mismatch }
        return received.count == expected.count ? nil : common
    }

    /// Describes how `received` differs from `expected`, or returns `nil` when equal.
    public static func difference(_ received: [UInt8], _ expected: [UInt8]) -> String? {
        guard let offset = firstMismatch(received, expected) else { return nil }
        if offset == min(received.count, expected.count) {
            return "received \(received.count) bytes, expected \(expected.count) (equal up to byte \(offset))"
        }
        return "byte \(offset) of \(expected.count) differs: received 0x\(hex(received[offset])), expected 0x\(hex(expected[offset]))"
            + (received.count == expected.count ? "" : "; received \(received.count) bytes in all")
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }

    /// SplitMix64: small, fast, and good enough to tell chunks apart.
    public struct Generator: Sendable {
        private var state: UInt64
        public init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

        public mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        /// A value in `range`.
        public mutating func next(in range: ClosedRange<Int>) -> Int {
            let width = UInt64(range.upperBound - range.lowerBound) + 1
            return range.lowerBound + Int(next() % width)
        }
    }
}
