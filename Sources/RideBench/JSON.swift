import Foundation
import RideCore

/// Worker lines use Codable (a handful per run); the final report is written by hand so
/// its keys keep a readable order.
func encodeJSONLine<T: Encodable>(_ value: T) -> String? {
    guard let data = try? JSONEncoder().encode(value) else { return nil }
    return String(decoding: data, as: UTF8.self)
}

func decodeWorkerReport(_ line: String) -> WorkerReport? {
    try? JSONDecoder().decode(WorkerReport.self, from: Data(line.utf8))
}

/// A JSON value with ordered object keys.
indirect enum JSONOut {
    case int(Int64)
    case double(Double, places: Int)
    case string(String)
    case bool(Bool)
    case null
    case object([(String, JSONOut)])

    static func num(_ v: Double?, _ places: Int = 2) -> JSONOut { v.map { .double($0, places: places) } ?? .null }
    static func int(_ v: Int) -> JSONOut { .int(Int64(v)) }

    var text: String {
        switch self {
        case .int(let v): return String(v)
        case .double(let v, let places):
            guard v.isFinite else { return "null" }
            return String(format: "%.\(places)f", v)
        case .string(let s): return quote(s)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .object(let kv): return "{" + kv.map { quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    private func quote(_ s: String) -> String {
        var w = JSONWriter(reserving: s.utf8.count + 8)
        w.string(s)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
