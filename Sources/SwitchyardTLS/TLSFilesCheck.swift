import Glibc
import Switchyard

extension TLSConfiguration {
    /// What is wrong with the files a tool's TLS options name, or nil: first each file must
    /// be readable (the problem names the option and the file, with the system's reason),
    /// then `configuration`, if given, must load (its certificates, key and CA bundle parse
    /// and match: the problem is ``TLSContext``'s error, which names the file).
    ///
    /// For command-line tools, so that a missing or bad PEM file is a bad argument at once
    /// rather than a failed handshake later.
    public static func problem(
        withFiles files: [(option: String, path: String?)], loading configuration: TLSConfiguration?
    ) -> String? {
        for (option, path) in files {
            if let path, access(path, R_OK) != 0 {
                return "\(option) \(path): cannot read it (\(String(cString: strerror(errno))))"
            }
        }
        guard let configuration else { return nil }
        do {
            _ = try TLSContext(configuration: configuration)
            return nil
        } catch {
            return "TLS: \(error.message)"
        }
    }
}
