import Foundation
import Testing

/// The repository's Markdown pages link to files by relative paths (the README to the
/// articles, the articles to examples, the benchmarks page to its results); moving a file
/// must not leave a link behind. Web addresses, `doc:` links and anchors within a page are
/// DocC's and the reader's business, not checked here.
@Suite("The documentation's links")
struct MarkdownLinkTests {
    /// The Markdown pages of the repository: the top-level ones, `docs/`, the examples',
    /// the benchmarks' (their generated results aside) and every DocC article.
    static func pages() throws -> [String] {
        let root = DocumentationBlockTests.root
        var pages = try DocumentationBlockTests.documents().map(\.path)
        for path in ["CONTRIBUTING.md", "CHANGELOG.md", "Benchmarks/README.md", "Examples/UnixBackend/README.md", "Examples/DecoratorBackend/README.md", "API/README.md"] {
            pages.append(path)
        }
        let docs = root.appendingPathComponent("docs").path
        for file in (try? FileManager.default.contentsOfDirectory(atPath: docs)) ?? [] where file.hasSuffix(".md") {
            pages.append("docs/\(file)")
        }
        return pages
    }

    /// The relative link targets of `text`: `[words](target)` and `![alt](target)`, less any
    /// `#anchor`, leaving out web addresses and `doc:` links.
    static func relativeTargets(in text: String) -> [String] {
        var targets: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "](") {
            rest = rest[open.upperBound...]
            guard let close = rest.firstIndex(of: ")") else { break }
            let target = String(rest[..<close]).split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            rest = rest[close...]
            if target.isEmpty || target.contains("://") || target.hasPrefix("doc:") || target.hasPrefix("mailto:") || target.contains(" ") {
                continue
            }
            targets.append(target)
        }
        return targets
    }

    @Test("Every relative link of a Markdown page names a file or folder of the repository")
    func relativeLinksResolve() throws {
        let root = DocumentationBlockTests.root
        let pages = try Self.pages()
        #expect(pages.count > 20, "only \(pages.count) pages read")
        for page in pages {
            let text = try String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)
            let folder = root.appendingPathComponent(page).deletingLastPathComponent()
            for target in Self.relativeTargets(in: text) {
                let resolved = folder.appendingPathComponent(target).standardizedFileURL.path
                #expect(FileManager.default.fileExists(atPath: resolved), "\(page) links to \(target), which is not there")
            }
        }
    }

    @Test("The link reader finds relative targets and leaves out addresses, doc links and anchors")
    func linkReader() {
        let text = "See [a](Sources/A.md), [b](https://x.org/b), <doc:C>, [d](doc:D), ![e](e.svg), [f](g.md#h), [i](#j)."
        #expect(Self.relativeTargets(in: text) == ["Sources/A.md", "e.svg", "g.md"])
    }
}
