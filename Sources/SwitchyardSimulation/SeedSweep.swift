public import Switchyard

// Seed sweeps: a test that passes for one seed may fail for another, where the seed's
// jitter and losses order events otherwise. A sweep runs the same steps on a fresh
// network per seed and stops at the first seed that fails, with what it needs to replay
// it: the seed and the event log of the failing run.

extension SimulatedNetwork {
    /// A seed whose run failed in ``SimulatedNetwork/sweep(seeds:link:_:)``: the seed, what
    /// the run threw, and the failing run's event log. Make a network with the same seed
    /// and run the same steps to replay it.
    public struct SeedFailure: Error, CustomStringConvertible {
        /// The seed of the failing run.
        public let seed: UInt64
        /// What the run threw.
        public let error: any Error
        /// The failing run's events (``SimulatedNetwork/eventLog``).
        public let eventLog: [String]
        /// How many seeds ran before it, this one included.
        public let seedsRun: Int

        public var description: String {
            "seed \(seed) failed (run \(seedsRun) of the sweep): \(error); replay it with SimulatedNetwork(seed: \(seed))"
        }
    }

    /// Runs `body` once per seed of `seeds`, in order, each time on a fresh network made
    /// with that seed and `link`, driven by hand; returns the first seed whose run threw,
    /// or `nil` when every run returned.
    ///
    /// ```swift
    /// let found = try await SimulatedNetwork.sweep(seeds: 1...1_000) { network in
    ///     try await myScenario(on: network)
    /// }
    /// if let found { Issue.record("\(found)") }   // names the seed; SimulatedNetwork(seed:) replays it
    /// ```
    /// - Throws: a `TransportError` if a network could not be made (its thread did not
    ///   start); what `body` throws is the sweep's result, not thrown.
    public static func sweep<Seeds: Sequence<UInt64>>(
        seeds: Seeds, link: SimulatedLink = SimulatedLink(), _ body: (SimulatedNetwork) async throws -> Void
    ) async throws(TransportError) -> SeedFailure? {
        var count = 0
        for seed in seeds {
            count += 1
            let network = try SimulatedNetwork(seed: seed, driving: .manual, link: link)
            do {
                try await body(network)
            } catch {
                return SeedFailure(seed: seed, error: error, eventLog: network.eventLog, seedsRun: count)
            }
        }
        return nil
    }
}
