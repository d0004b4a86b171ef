/// A caller's mark on the data of one `sendData` call: the state machine hands it back on
/// the outbound frame that carries that data's last byte (``H2Outbound/writeTokens``), so
/// the driver can report the write (`didWriteData`) once the kernel took that frame.
/// The state machine never looks inside.
package struct H2WriteToken: Sendable, Hashable {
    package var rawValue: UInt64
    package init(_ rawValue: UInt64) { self.rawValue = rawValue }
}
