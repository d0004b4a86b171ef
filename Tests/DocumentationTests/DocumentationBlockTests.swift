import Foundation
import Testing

/// The rule that keeps the documentation's examples from rotting: every ```swift block of
/// README.md and of the DocC articles (`Sources/*/*.docc/**/*.md`) is, character for
/// character, the code between a `// doc-block begin` and a `// doc-block end` marker in a
/// Swift source under `Tests/` or `Examples/`, where a test compiles and runs it: in this
/// target; in the fixture library the loading tests load and run; in the outside backends'
/// packages (``outsidePackages``: the `unix` backend, the `counted` and `lossy`
/// decorators), whose own builds and tests scripts/test runs. A block may start with imports: each must be an import of that
/// source file. What a block leaves implicit (a `transport` made earlier, a server to talk
/// to) is set up before the begin marker; what the example promises is checked after the
/// end marker. Every marked region is shown by at least one block, so no copy outlives
/// its block; and every fence names its language (`bash` for shell, `text` for output), so
/// an unmarked Swift block cannot slip past.
@Suite("The documentation's code blocks")
struct DocumentationBlockTests {
    /// The package's root: three levels above this file.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("Every Swift block in the README and the articles is a test's code, and every test's region is shown")
    func everyBlockIsTested() throws {
        let documents = try Self.documents()
        #expect(documents.contains { $0.path == "README.md" })
        for catalog in Self.catalogs {
            #expect(documents.contains { $0.path.hasPrefix("Sources/\(catalog)/\(catalog).docc/") }, "no article of \(catalog)'s catalog was read")
        }
        let regions = try Self.regions()
        var shown = Set<Int>()
        var blocks = 0
        for document in documents {
            for block in try DocumentBlocks.parse(document.text, path: document.path) where block.language == "swift" {
                blocks += 1
                let (imports, code) = DocumentBlocks.splitImports(block.code)
                let matches = regions.indices.filter { regions[$0].code == code }
                guard let index = matches.first else {
                    Issue.record("\(document.path):\(block.line): this Swift block is no test's code (no `// doc-block begin` region under Tests/ has its text):\n\(code)")
                    continue
                }
                #expect(matches.count == 1, "\(document.path):\(block.line): the block's code is in more than one region")
                shown.insert(index)
                let region = regions[index]
                for line in imports where !region.fileImports.contains(line) {
                    Issue.record("\(document.path):\(block.line): the block's `\(line)` is not an import of \(region.path)")
                }
            }
        }
        #expect(blocks >= 10, "found only \(blocks) Swift blocks: the parser or the paths are wrong")
        for package in Self.outsidePackages {
            #expect(regions.contains { $0.path.hasPrefix(package + "/") }, "no doc-block region was read in \(package)")
        }
        for (index, region) in regions.enumerated() where !shown.contains(index) {
            Issue.record("\(region.path):\(region.line): this doc-block region is shown by no block of the README or the articles")
        }
    }

    @Test("Every fence names its language, and shell blocks say bash")
    func fencesNameTheirLanguage() throws {
        for document in try Self.documents() {
            for block in try DocumentBlocks.parse(document.text, path: document.path) {
                #expect(!block.language.isEmpty, "\(document.path):\(block.line): a fence without a language (swift, bash, text, ...)")
                #expect(!["sh", "shell", "console", "zsh"].contains(block.language), "\(document.path):\(block.line): shell blocks are ```bash")
            }
        }
    }

    @Test("The block parser finds fences, their languages and their text")
    func parser() throws {
        let text = "Intro\n\n```swift\nimport A\n\nlet x = 1\n```\n\n- item:\n\n  ```bash\n  echo hi\n  ```\n"
        let blocks = try DocumentBlocks.parse(text, path: "x.md")
        #expect(blocks.map(\.language) == ["swift", "bash"])
        #expect(blocks.map(\.line) == [3, 11])
        #expect(blocks[0].code == "import A\n\nlet x = 1")
        #expect(blocks[1].code == "echo hi")
        #expect(DocumentBlocks.splitImports(blocks[0].code) == (["import A"], "let x = 1"))
        #expect(throws: DocumentBlocks.Unclosed.self) { try DocumentBlocks.parse("```swift\nlet x = 1\n", path: "y.md") }
        let regions = DocumentBlocks.regions(in: "import A\nfunc f() {\n    // doc-block begin\n    let y = 2\n\n    if y > 1 {\n        print(y)\n    }\n    // doc-block end\n}\n", path: "t.swift")
        #expect(regions.map(\.code) == ["let y = 2\n\nif y > 1 {\n    print(y)\n}"])
        #expect(regions.first?.fileImports == ["import A"])
    }

    /// The targets whose DocC catalogs hold articles (scripts/docs builds every catalog
    /// under Sources/; this list only makes sure none of these went unread).
    static let catalogs = [
        "Switchyard", "SwitchyardCalls", "SwitchyardReachability", "SwitchyardBackendKit", "SwitchyardBackendLoader",
        "SwitchyardConformance", "SwitchyardTLS", "SwitchyardTransfer", "SwitchyardSimulation",
    ]

    /// The outside backends' packages, whose code "Writing a backend" shows: the guide's
    /// blocks are held to their regions like any other (their sources are read here; their
    /// own builds and tests, in scripts/test, run the code).
    static let outsidePackages = ["Examples/UnixBackend", "Examples/DecoratorBackend"]

    struct Document {
        var path: String
        var text: String
    }

    /// README.md and every article of every catalog.
    static func documents() throws -> [Document] {
        var paths = ["README.md"]
        let sources = root.appendingPathComponent("Sources")
        for target in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let targetURL = sources.appendingPathComponent(target)
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: targetURL.path)) ?? [] where entry.hasSuffix(".docc") {
                let catalog = "Sources/\(target)/\(entry)"
                let files = FileManager.default.enumerator(atPath: root.appendingPathComponent(catalog).path)
                while let file = files?.nextObject() as? String {
                    if file.hasSuffix(".md") { paths.append("\(catalog)/\(file)") }
                }
            }
        }
        return try paths.map { Document(path: $0, text: try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)) }
    }

    /// Every doc-block region of every Swift source under Tests/ and Examples/ (the
    /// outside backend's package included, whose own tests run its regions).
    static func regions() throws -> [DocumentBlocks.Region] {
        var regions: [DocumentBlocks.Region] = []
        for folder in ["Tests", "Examples"] {
            let files = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)
            while let file = files?.nextObject() as? String {
                if (file as NSString).lastPathComponent.hasPrefix(".build") {
                    files?.skipDescendants()
                    continue
                }
                let path = "\(folder)/\(file)"
                guard path.hasSuffix(".swift"), !path.contains("/.build"), path != "Tests/DocumentationTests/DocumentationBlockTests.swift" else {
                    continue
                }
                let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
                regions += DocumentBlocks.regions(in: text, path: path)
            }
        }
        return regions
    }
}

/// Fenced blocks of a Markdown text, and marked regions of a Swift source.
enum DocumentBlocks {
    struct Block {
        var language: String
        /// The fence's line, from 1.
        var line: Int
        /// The lines between the fences, less the opening fence's indentation.
        var code: String
    }

    struct Region {
        var path: String
        var line: Int
        /// The lines between the markers, less the begin marker's indentation.
        var code: String
        /// The file's top-level `import` lines.
        var fileImports: Set<String>
    }

    struct Unclosed: Error, CustomStringConvertible {
        var path: String
        var line: Int
        var description: String { "\(path):\(line): a code fence that is never closed" }
    }

    static func parse(_ text: String, path: String) throws -> [Block] {
        var blocks: [Block] = []
        var open: (language: String, line: Int, indent: Int, lines: [Substring])?
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let indent = line.prefix { $0 == " " }.count
            let trimmed = line.dropFirst(indent)
            if var current = open {
                if trimmed.hasPrefix("```") && trimmed.allSatisfy({ $0 == "`" }) {
                    blocks.append(Block(language: current.language, line: current.line, code: current.lines.joined(separator: "\n")))
                    open = nil
                } else {
                    current.lines.append(line.dropFirst(min(current.indent, indent)))
                    open = current
                }
            } else if trimmed.hasPrefix("```") {
                open = (String(trimmed.dropFirst(3)).trimmingCharacters(in: .whitespaces), number + 1, indent, [])
            }
        }
        if let open { throw Unclosed(path: path, line: open.line) }
        return blocks
    }

    /// The block's leading `import` lines (and the blank lines after them), and the rest.
    static func splitImports(_ code: String) -> (imports: [String], code: String) {
        var lines = code.split(separator: "\n", omittingEmptySubsequences: false)[...]
        var imports: [String] = []
        while let first = lines.first, first.hasPrefix("import ") || (first.isEmpty && !imports.isEmpty) {
            if !first.isEmpty { imports.append(String(first)) }
            lines = lines.dropFirst()
        }
        return (imports, lines.joined(separator: "\n"))
    }

    static func regions(in text: String, path: String) -> [Region] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let imports = Set(lines.filter { $0.hasPrefix("import ") || $0.hasPrefix("public import ") }
            .map { String($0.hasPrefix("public ") ? $0.dropFirst(7) : $0) })
        var regions: [Region] = []
        var open: (line: Int, indent: Int, lines: [Substring])?
        for (number, line) in lines.enumerated() {
            let trimmed = line.drop { $0 == " " }
            if trimmed.hasPrefix("// doc-block begin") {
                open = (number + 1, line.count - trimmed.count, [])
            } else if trimmed == "// doc-block end", let current = open {
                regions.append(Region(path: path, line: current.line, code: current.lines.joined(separator: "\n"), fileImports: imports))
                open = nil
            } else if var current = open {
                current.lines.append(line.dropFirst(min(current.indent, line.prefix { $0 == " " }.count)))
                open = current
            }
        }
        return regions
    }
}
