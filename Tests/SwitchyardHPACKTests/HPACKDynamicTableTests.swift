import SwitchyardHPACK
import Testing

@Suite("The dynamic table (RFC 7541 section 4)")
struct HPACKDynamicTableTests {
    @Test("Sizes count name, value and 32; the oldest entries go first")
    func eviction() {
        var table = HPACKDynamicTable(maxSize: 100)
        table.add(name: Array("a".utf8), value: Array("1".utf8))  // 34
        table.add(name: Array("b".utf8), value: Array("2".utf8))  // 34
        expectTable(table, ["b": "2", "a": "1"], size: 68)
        table.add(name: Array("c".utf8), value: Array("3".utf8))  // 34: evicts a
        expectTable(table, ["c": "3", "b": "2"], size: 68)
        // Exactly the maximum size fits, after evicting everything.
        table.add(name: Array("d".utf8), value: [UInt8](repeating: 0x78, count: 67))
        #expect(table.count == 1 && table.size == 100)
    }

    @Test("An entry larger than the table empties it and is not added")
    func tooLarge() {
        var table = HPACKDynamicTable(maxSize: 100)
        table.add(name: Array("a".utf8), value: Array("1".utf8))
        table.add(name: Array("d".utf8), value: [UInt8](repeating: 0x78, count: 68))
        expectTable(table, [:], size: 0)
    }

    @Test("A smaller maximum size evicts until the table fits; zero empties it")
    func shrink() {
        var table = HPACKDynamicTable(maxSize: 4096)
        for n in 0..<10 { table.add(name: Array("k\(n)".utf8), value: Array("v".utf8)) }  // 35 each
        table.setMaxSize(100)
        expectTable(table, ["k9": "v", "k8": "v"], size: 70)
        table.setMaxSize(0)
        expectTable(table, [:], size: 0)
        table.add(name: Array("a".utf8), value: [])
        #expect(table.count == 0)
    }

    @Test("Many additions keep the order and sizes of a plain list (the ring wraps and grows)")
    func againstAList() {
        var table = HPACKDynamicTable(maxSize: 300)
        var model: [HPACKField] = []  // newest first
        var seed: UInt64 = 7
        for step in 0..<2000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = Int(seed >> 58)  // 0...63
            let field = HPACKField(name: Array("n\(step % 13)".utf8), value: [UInt8](repeating: UInt8(step & 0xFF), count: length))
            if step % 200 == 199 {
                let size = [0, 50, 300, 150][(step / 200) % 4]
                table.setMaxSize(size)
                while model.reduce(0, { $0 + $1.size }) > size { model.removeLast() }
            }
            table.add(name: field.name, value: field.value)
            if field.size > table.maxSize {
                model.removeAll()
            } else {
                model.insert(field, at: 0)
                while model.reduce(0, { $0 + $1.size }) > table.maxSize { model.removeLast() }
            }
            #expect(table.entries == model, "step \(step)")
            #expect(table.size == model.reduce(0, { $0 + $1.size }), "step \(step)")
        }
    }
}
