import Glibc

/// The backend libraries the package builds for its loading tests. (Glibc, not Foundation:
/// Foundation's `String` members would reach every test target that imports this one.)
public enum FixtureLibrary {
    /// The file name of the bsd backend exported as "bsd-loaded" (the
    /// `SwitchyardBSDLoadedFixture` product).
    public static let bsdLoadedName = "libSwitchyardBSDLoadedFixture.so"

    /// The path of `libSwitchyardBSDLoadedFixture.so`, next to the test bundle in the
    /// build folder (whatever configuration or scratch path built it), else in
    /// `repository`'s `.build/debug`.
    /// - Throws: when it is in neither, saying where it looked and how to build it.
    public static func bsdLoaded(repository: String) throws -> String {
        var candidates: [String] = []
        var folder = executablePath()
        for _ in 0..<5 {
            guard let slash = folder.lastIndex(of: "/"), slash != folder.startIndex else { break }
            folder = String(folder[..<slash])
            candidates.append(folder)
        }
        candidates.append(repository + "/.build/debug")
        guard let found = candidates.first(where: { access($0 + "/" + bsdLoadedName, F_OK) == 0 }) else {
            throw NotBuilt(
                description: "\(bsdLoadedName) is not next to the tests (looked in \(candidates.joined(separator: ", "))); build the package with `swift build --build-tests`, which builds the SwitchyardBSDLoadedFixture product")
        }
        return found + "/" + bsdLoadedName
    }

    /// A fixture library that was not built.
    public struct NotBuilt: Error, CustomStringConvertible {
        public let description: String
    }

    /// This process's executable (`/proc/self/exe`, resolved), or "" when unreadable.
    private static func executablePath() -> String {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes { readlink("/proc/self/exe", $0.baseAddress!, $0.count - 1) }
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
    }
}
