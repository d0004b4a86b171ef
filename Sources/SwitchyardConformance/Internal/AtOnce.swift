/// What "at once" means wherever a contract says it (a refused connect, a name that does
/// not resolve, a call with no connectivity, a cancelled pending connect, ...): under
/// 100 ms, measured by the scenario from the moment it asked.
let atOnceBound: Duration = .milliseconds(100)

extension ConformanceContext {
    /// Records `elapsed` under `name` and fails unless it is under ``atOnceBound``.
    func expectAtOnce(
        _ elapsed: Duration, _ name: String, _ what: String, file: String = #fileID, line: Int = #line
    ) throws {
        record(name, elapsed)
        log("\(what) after \(fineMilliseconds(elapsed))")
        try expect(
            elapsed < atOnceBound,
            "\(what) took \(fineMilliseconds(elapsed)); the contract says at once (under \(milliseconds(atOnceBound)))",
            file: file, line: line)
    }
}
