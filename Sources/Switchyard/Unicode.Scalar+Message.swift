extension Unicode.Scalar {
    /// The character as an error message shows it: `'!' (U+0021)`, or `a space (U+0020)`
    /// and `a control character (U+000A)` for what does not print. Endpoints and call
    /// metadata name a bad character this way.
    package var shownInMessage: String {
        let hex = String(value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: Swift.max(0, 4 - hex.count)) + hex
        if value == 0x20 { return "a space (\(code))" }
        if value < 0x20 || value == 0x7f { return "a control character (\(code))" }
        return "'\(Character(self))' (\(code))"
    }
}
