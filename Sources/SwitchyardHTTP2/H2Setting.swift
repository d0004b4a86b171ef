/// One parameter of a SETTINGS frame (RFC 9113 section 6.5.1).
package struct H2Setting: Sendable, Hashable, CustomStringConvertible {
    package var identifier: Identifier
    package var value: UInt32

    package init(_ identifier: Identifier, _ value: UInt32) {
        self.identifier = identifier
        self.value = value
    }

    /// A setting's identifier; identifiers this list does not name are kept and ignored
    /// (section 6.5.2: "MUST ignore").
    package struct Identifier: Sendable, Hashable, CustomStringConvertible {
        package let rawValue: UInt16
        package init(_ rawValue: UInt16) { self.rawValue = rawValue }

        package static let headerTableSize = Identifier(0x1)
        package static let enablePush = Identifier(0x2)
        package static let maxConcurrentStreams = Identifier(0x3)
        package static let initialWindowSize = Identifier(0x4)
        package static let maxFrameSize = Identifier(0x5)
        package static let maxHeaderListSize = Identifier(0x6)

        package var description: String {
            switch rawValue {
            case 0x1: "SETTINGS_HEADER_TABLE_SIZE"
            case 0x2: "SETTINGS_ENABLE_PUSH"
            case 0x3: "SETTINGS_MAX_CONCURRENT_STREAMS"
            case 0x4: "SETTINGS_INITIAL_WINDOW_SIZE"
            case 0x5: "SETTINGS_MAX_FRAME_SIZE"
            case 0x6: "SETTINGS_MAX_HEADER_LIST_SIZE"
            default: "setting 0x\(String(rawValue, radix: 16))"
            }
        }
    }

    package var description: String { "\(identifier)=\(value)" }
}

/// The values of the settings one side of a connection has announced, starting from the
/// RFC's initial values (section 6.5.2) before any SETTINGS frame.
package struct H2Settings: Sendable, Hashable {
    package var headerTableSize: UInt32 = 4096
    package var enablePush: Bool = true
    /// `nil`: no limit announced (the RFC's initial value is "unlimited").
    package var maxConcurrentStreams: UInt32? = nil
    package var initialWindowSize: UInt32 = 65_535
    package var maxFrameSize: UInt32 = 16_384
    /// `nil`: no limit announced.
    package var maxHeaderListSize: UInt32? = nil

    package init() {}

    /// The largest values section 6.5.2 allows.
    package static let maxWindowSize: UInt32 = 0x7fff_ffff
    package static let maxFrameSizeRange: ClosedRange<UInt32> = 16_384...16_777_215
}
