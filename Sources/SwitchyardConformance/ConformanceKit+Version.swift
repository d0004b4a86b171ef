extension ConformanceKit {
    /// The kit's version: the release of Switchyard it comes with, `-dev` while that
    /// release is being made (CHANGELOG.md's Unreleased section). The tool prints it for
    /// `--version`, and a report carries it (``ConformanceReport/kitVersion``), so that a
    /// saved report says which kit wrote it.
    public static let version = "0.2.0-dev"
}
