public import Switchyard
public import Testing

/// Expects `body` to throw a `TransportError` with `code` and `reason` whose message holds
/// every one of `words`; records an issue at the caller's line otherwise.
public func expectTransportError(
    _ code: TransportError.Code, _ reason: TransportError.Reason, mentioning words: [String],
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws(TransportError) -> Void
) {
    do {
        try body()
        Issue.record("expected an error mentioning \(words)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.reason == reason, "\(error)", sourceLocation: sourceLocation)
        for word in words {
            #expect(error.message.contains(word), "'\(error.message)' should mention '\(word)'", sourceLocation: sourceLocation)
        }
    }
}
