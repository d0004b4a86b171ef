extension TransportConfiguration {
    /// The most event loops a transport runs: a loop is a thread, and more loops than
    /// this is a mistake on any machine Switchyard targets (the tools' `--event-loops`
    /// takes the same range).
    public static let maximumEventLoopCount = 1024

    /// Checks the settings a backend is made with; every backend Switchyard ships calls it
    /// first when it is made (a backend loaded from a library too, on the host's side), so
    /// a setting from a flag or a file that is out of range fails with its name and value
    /// instead of being bent into range or trapping.
    /// - Throws: `invalidArgument`, reason `invalid option`, naming the setting and value:
    ///   an ``eventLoopCount`` outside 1...``maximumEventLoopCount``, a negative
    ///   ``reservedDescriptors``, a ``stallTimeout`` that is not positive.
    public func validate() throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidOption, message: why)
        }
        if let eventLoopCount, !(1...Self.maximumEventLoopCount).contains(eventLoopCount) {
            throw bad("invalid event loop count \(eventLoopCount) (1...\(Self.maximumEventLoopCount), or nil for one per core)")
        }
        if reservedDescriptors < 0 {
            throw bad("invalid reservedDescriptors \(reservedDescriptors) (0 or more; 0 leaves the descriptor table alone)")
        }
        if let stallTimeout, stallTimeout <= .zero {
            throw bad("invalid stall timeout \(stallTimeout): it must be positive")
        }
    }
}
