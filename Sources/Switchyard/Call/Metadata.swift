/// Key/value pairs that travel with a call, beside its messages: the client's request
/// metadata (with the call's method name), the server's response metadata, and the
/// server's trailing metadata (sent with its status). The shape of grpc-swift 2's
/// `CallMetadata`.
///
/// An ordered list: a key may repeat, and its values keep the order they were added in.
///
/// - **Keys** are ASCII: letters, digits, `-`, `_` and `.`, 1 to 255 bytes. Upper-case
///   letters are lower-cased when a pair is added, so `Trace-ID` and `trace-id` are one
///   key; lookups lower-case the key the same way.
/// - **Values** are strings or bytes: a key that ends in `-bin` holds binary values, any
///   other key holds strings (gRPC's split). A string value is any Unicode text without
///   control characters (U+0000 to U+001F and U+007F; a tab is allowed).
///
/// Adding a pair that breaks a rule throws `invalidArgument`, reason `invalid metadata`,
/// with a message that names the key or value and says what is wrong. Received metadata
/// is held to the same rules (a peer breaking them ends the call with a protocol
/// violation), so what a handler reads always passed them.
///
/// ```swift
/// var metadata = CallMetadata()
/// try metadata.addString("42", forKey: "Trace-ID")       // stored as "trace-id"
/// try metadata.addBinary([0xde, 0xad], forKey: "token-bin")
/// metadata[stringValues: "trace-id"]                     // ["42"]
/// ```
public struct CallMetadata: Sendable, Hashable, RandomAccessCollection, CustomStringConvertible {
    /// A value: a string (keys without the `-bin` suffix) or bytes (keys with it).
    public enum Value: Sendable, Hashable, CustomStringConvertible {
        case string(String)
        case binary([UInt8])

        public var description: String {
            switch self {
            case .string(let string): "\"\(string)\""
            case .binary(let bytes): "\(bytes.count) bytes"
            }
        }
    }

    /// One pair: its key (lower-cased, valid) and its value.
    public struct Entry: Sendable, Hashable {
        public let key: String
        public let value: Value
    }

    /// The longest key, in bytes (its length is one byte on the wire).
    public static let maximumKeyLength = 255

    /// The pairs, in order (internal: CallMetadata+Frame.swift decodes into it).
    var entries: [Entry] = []

    /// Empty metadata.
    public init() {}

    /// CallMetadata with `pairs`, in order (see ``add(_:forKey:)``).
    /// - Throws: `invalidArgument`, reason `invalid metadata`, for the first bad pair.
    public init(_ pairs: some Sequence<(key: String, value: Value)>) throws(TransportError) {
        for pair in pairs { try add(pair.value, forKey: pair.key) }
    }

    /// Adds a string value for `key` (which must not end in `-bin`).
    /// - Throws: `invalidArgument`, reason `invalid metadata`: a bad key, a `-bin` key, a
    ///   control character in the value.
    public mutating func addString(_ value: String, forKey key: String) throws(TransportError) {
        try add(.string(value), forKey: key)
    }

    /// Adds a binary value for `key` (which must end in `-bin`).
    /// - Throws: `invalidArgument`, reason `invalid metadata`: a bad key, or one without
    ///   the `-bin` suffix.
    public mutating func addBinary(_ value: [UInt8], forKey key: String) throws(TransportError) {
        try add(.binary(value), forKey: key)
    }

    /// Adds `value` for `key`, after the pairs already there (a key may repeat).
    /// - Throws: `invalidArgument`, reason `invalid metadata`, naming the key or value.
    public mutating func add(_ value: Value, forKey key: String) throws(TransportError) {
        let key = try Self.normalized(key: key)
        try Self.check(value, forKey: key)
        entries.append(Entry(key: key, value: value))
    }

    /// Adds every pair of `other`, after the pairs already here.
    public mutating func add(contentsOf other: CallMetadata) {
        entries.append(contentsOf: other.entries)
    }

    /// Removes every value of `key`; returns whether there was one.
    @discardableResult
    public mutating func removeAll(forKey key: String) -> Bool {
        let key = Self.lowercased(key)
        let before = entries.count
        entries.removeAll { $0.key == key }
        return entries.count != before
    }

    /// The values of `key`, in the order they were added (empty if none).
    public subscript(key: String) -> [Value] {
        let key = Self.lowercased(key)
        return entries.filter { $0.key == key }.map(\.value)
    }

    /// The string values of `key`, in order.
    public subscript(stringValues key: String) -> [String] {
        self[key].compactMap { if case .string(let string) = $0 { string } else { nil } }
    }

    /// The binary values of `key`, in order.
    public subscript(binaryValues key: String) -> [[UInt8]] {
        self[key].compactMap { if case .binary(let bytes) = $0 { bytes } else { nil } }
    }

    // MARK: RandomAccessCollection

    public var startIndex: Int { entries.startIndex }
    public var endIndex: Int { entries.endIndex }
    public subscript(position: Int) -> Entry { entries[position] }

    public var description: String {
        "[" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
    }

    // MARK: the rules

    /// `key` with ASCII upper-case letters lower-cased (nothing else changes).
    static func lowercased(_ key: String) -> String {
        guard key.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5a }) else { return key }
        return String(decoding: key.utf8.map { $0 >= 0x41 && $0 <= 0x5a ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// `key` lower-cased, or the error saying why it is no key.
    static func normalized(key: String) throws(TransportError) -> String {
        let key = lowercased(key)
        if let problem = problem(key: key) { throw invalid("invalid metadata key \(quoted(key)): \(problem)") }
        return key
    }

    /// Why `key` (lower-cased already) is no key, or nil.
    static func problem(key: String) -> String? {
        if key.isEmpty { return "it is empty" }
        for scalar in key.unicodeScalars where !isKeyScalar(scalar) {
            return "it holds \(scalar.shownInMessage); a key is ASCII letters, digits, '-', '_' and '.'"
        }
        if key.utf8.count > maximumKeyLength { return "it is \(key.utf8.count) bytes long; a key has at most \(maximumKeyLength)" }
        return nil
    }

    /// Whether `key` holds binary values (it ends in `-bin`).
    static func isBinary(key: String) -> Bool { key.utf8.count > 4 && key.hasSuffix("-bin") }

    /// Checks that `value` fits `key` (valid, lower-cased).
    static func check(_ value: Value, forKey key: String) throws(TransportError) {
        if let problem = problem(value, forKey: key) { throw invalid(problem) }
    }

    /// Why `value` does not fit `key`, or nil.
    static func problem(_ value: Value, forKey key: String) -> String? {
        switch value {
        case .binary:
            if !isBinary(key: key) {
                return "a binary value for the key \(quoted(key)): binary values go under keys that end in \"-bin\""
            }
        case .string(let string):
            if isBinary(key: key) {
                return "a string value \(quoted(string)) for the key \(quoted(key)): keys that end in \"-bin\" hold binary values"
            }
            if let bad = string.unicodeScalars.first(where: isControl) {
                return "the value \(quoted(string)) of the key \(quoted(key)) holds \(bad.shownInMessage); values hold no control characters"
            }
        }
        return nil
    }

    /// Why `method` cannot name a call, or nil: at most 65,535 UTF-8 bytes (its length is
    /// two bytes on the wire), no control characters.
    static func problem(method: String) -> String? {
        if let bad = method.unicodeScalars.first(where: isControl) {
            return "the method name \(quoted(method)) holds \(bad.shownInMessage); a method name holds no control characters"
        }
        if method.utf8.count > Int(UInt16.max) {
            return "the method name is \(method.utf8.count) bytes long; it has at most \(UInt16.max)"
        }
        return nil
    }

    private static func isKeyScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x30...0x39, 0x61...0x7a, 0x2d, 0x5f, 0x2e: true
        default: false
        }
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7f
    }

    private static func invalid(_ message: String) -> TransportError {
        TransportError(code: .invalidArgument, reason: .invalidMetadata, message: message)
    }

    /// A key or value as a message shows it: quoted, cut after 64 characters.
    static func quoted(_ text: String) -> String {
        let shown = text.unicodeScalars.count > 64 ? String(String.UnicodeScalarView(text.unicodeScalars.prefix(64))) + "..." : text
        return "\"" + shown.unicodeScalars.map { isControl($0) ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined() + "\""
    }

}

extension TransportError.Reason {
    /// CallMetadata or a method name that breaks ``CallMetadata``'s rules, given by the program.
    public static let invalidMetadata = TransportError.Reason("invalid metadata")
    /// A received headers or trailers frame announced more than
    /// ``CallConfiguration/maximumMetadataSize`` bytes.
    public static let metadataTooLarge = TransportError.Reason("metadata too large")
}
