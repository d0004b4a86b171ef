/// A frame to write, in the order ``H2ConnectionStateMachine/takeOutbound(into:)`` gives
/// them, with the write tokens of the `sendData` calls whose last byte it carries.
package struct H2Outbound: Sendable, Hashable {
    package var frame: H2Frame
    /// The tokens whose data is fully written once this frame is: empty for all but the
    /// DATA frame that carries a token's last byte.
    package var writeTokens: [H2WriteToken]

    package init(_ frame: H2Frame, writeTokens: [H2WriteToken] = []) {
        self.frame = frame
        self.writeTokens = writeTokens
    }
}
