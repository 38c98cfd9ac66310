import Foundation
import Testing
@testable import RideCore

// GBFS system_pricing_plans.json in and out. The example documents are the spec's own
// (MobilityData/gbfs gbfs.md, v3.1-RC3 and v2.2, "system_pricing_plans.json" examples).

fileprivate let usd = Currency(code: "USD")!
fileprivate let cad = Currency(code: "CAD")!

fileprivate func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// A v3 document around `plans` (the text between `[` and `]`).
fileprivate func doc(_ plans: String) -> [UInt8] {
    bytes(#"{"last_updated":"2023-07-17T13:34:13+02:00","ttl":300,"version":"3.1-RC3","data":{"plans":["# + plans + "]}}")
}

/// The refusal's message, or nil if the document was accepted.
fileprivate func refusal(_ b: [UInt8]) -> String? {
    do {
        _ = try GBFSPlans.parse(b)
        return nil
    } catch {
        return error.description
    }
}

fileprivate let specUSDText = """
{
  "last_updated": "2023-07-17T13:34:13+02:00",
  "ttl": 300,
  "version": "3.1-RC",
  "data": {
    "plans": [
      {
        "plan_id": "plan2",
        "name": [ { "text": "One-Way", "language": "en" } ],
        "currency": "USD",
        "price": 2.00,
        "reservation_price_per_min": 0.15,
        "is_taxable": false,
        "description": [
          { "text": "First half-hour: $2, second half-hour: $3, beyond one hour: $0.10/min", "language": "en" }
        ],
        "per_min_pricing": [
          { "start": 30, "end": 60, "rate": 3.00, "interval": 0 },
          { "start": 60, "rate": 0.10, "interval": 1 }
        ]
      }
    ]
  }
}
"""

fileprivate let specCADText = """
{
  "last_updated": "2023-07-17T13:34:13+02:00",
  "ttl": 300,
  "version": "3.1-RC",
  "data": {
    "plans": [
      {
        "plan_id": "plan3",
        "name": [ { "text": "Simple Rate", "language": "en" } ],
        "currency": "CAD",
        "price": 3.00,
        "is_taxable": true,
        "description": [
          { "text": "$3 unlock fee, $0.25 per kilometer and 0.50 per minute, capped at $15 per 12-hour period.", "language": "en" }
        ],
        "per_km_pricing": [ { "start": 0, "rate": 0.25, "interval": 1 } ],
        "per_min_pricing": [ { "start": 0, "rate": 0.50, "interval": 1 } ],
        "fare_capping": { "duration": 720, "price": 15.00 }
      }
    ]
  }
}
"""

/// v2.2: plain-string name and description, integer POSIX last_updated, integer prices.
fileprivate let specV22Text = """
{
  "last_updated": 1609866247,
  "ttl": 0,
  "version": "2.2",
  "data": {
    "plans": [
      {
        "plan_id": "plan2",
        "name": "One-Way",
        "currency": "USD",
        "price": 2,
        "is_taxable": false,
        "description": "Includes 10km, overage fees apply after 10km.",
        "per_km_pricing": [
          { "start": 10, "rate": 1, "interval": 1, "end": 25 },
          { "start": 25, "rate": 0.5, "interval": 1 },
          { "start": 25, "rate": 3, "interval": 5 }
        ]
      },
      {
        "plan_id": "plan3",
        "name": "Simple Rate",
        "currency": "CAD",
        "price": 3,
        "is_taxable": true,
        "description": "$3 unlock fee, $0.25 per kilometer and 0.50 per minute.",
        "per_km_pricing": [ { "start": 0, "rate": 0.25, "interval": 1 } ],
        "per_min_pricing": [ { "start": 0, "rate": 0.50, "interval": 1 } ]
      }
    ]
  }
}
"""

struct GBFSParseTests {
    @Test func specExample1USD() throws {
        let plans = try GBFSPlans.parse(bytes(specUSDText))
        #expect(plans == [FarePlan(
            id: "plan2", names: ["en": "One-Way"],
            descriptions: ["en": "First half-hour: $2, second half-hour: $3, beyond one hour: $0.10/min"],
            currency: usd, price: 200, isTaxable: false,
            perMinute: [FareSegment(start: 30, rate: 300, interval: 0, end: 60),
                        FareSegment(start: 60, rate: 10, interval: 1)],
            billing: .started)])
        // The parsed plan bills what the spec's sentence says.
        let p = plans[0]
        #expect([0, 1800, 1801, 3600, 3601, 3660].map { FareEngine.fare(p, riding: $0, paused: 0) }
                == [200, 200, 500, 500, 510, 510])
    }

    @Test func specExample2CAD() throws {
        let plans = try GBFSPlans.parse(bytes(specCADText))
        #expect(plans.count == 1)
        let p = plans[0]
        #expect(p.id == "plan3")
        #expect(p.currency == cad)
        #expect(p.price == 300)
        #expect(p.isTaxable)
        #expect(p.perMinute == [FareSegment(start: 0, rate: 50, interval: 1)])
        #expect(p.perKm == [FareSegment(start: 0, rate: 25, interval: 1)])
        #expect(p.cap == FareCap(duration: 720, price: 1500))
        #expect(p.billing == .started)
        #expect(FareEngine.fare(p, riding: 10 * 3600, paused: 0) == 1500)
        #expect(FareEngine.fare(p, riding: 13 * 3600, paused: 0) == 3000)
    }

    @Test func v22Examples() throws {
        let plans = try GBFSPlans.parse(bytes(specV22Text))
        #expect(plans.map(\.id) == ["plan2", "plan3"])
        #expect(plans[0].names == ["": "One-Way"])
        #expect(plans[0].descriptions == ["": "Includes 10km, overage fees apply after 10km."])
        #expect(plans[0].displayName == "One-Way")
        #expect(plans[0].price == 200)
        #expect(plans[0].perKm == [FareSegment(start: 10, rate: 100, interval: 1, end: 25),
                                   FareSegment(start: 25, rate: 50, interval: 1),
                                   FareSegment(start: 25, rate: 300, interval: 5)])
        // "does not pay more than the base price for the first 10 km", then $1/km to 25 km,
        // then $0.50/km plus $3 per started 5 km.
        let km = { (m: Int64) in FareEngine.fare(plans[0], riding: 600, paused: 0, metres: m) }
        #expect(km(10_000) == 200)
        #expect(km(10_001) == 300)
        #expect(km(25_000) == 200 + 15 * 100)
        #expect(km(25_001) == 200 + 15 * 100 + 50 + 300)
        #expect(km(30_000) == 200 + 15 * 100 + 5 * 50 + 300)
        #expect(km(30_001) == 200 + 15 * 100 + 6 * 50 + 2 * 300)
        #expect(plans[1].price == 300 && plans[1].perMinute == [FareSegment(start: 0, rate: 50, interval: 1)])
    }

    /// GBFS 2.x allowed `price` as a string "in decimal monetary value" (v2.2/v2.3 table);
    /// v3 only allows a number. Both are read, exactly.
    @Test(arguments: [(#""2.00""#, Int64(200)), (#""0.5""#, 50), ("2.50", 250), ("2.500", 250), ("0", 0), ("7", 700)])
    func priceForms(_ text: String, _ minor: Int64) throws {
        let p = try GBFSPlans.parse(doc(#"{"plan_id":"p","name":"P","currency":"USD","price":\#(text),"is_taxable":false,"description":"d"}"#))
        #expect(p[0].price == minor)
    }

    @Test func krwWholeAmountsAndTrailingZeros() throws {
        let p = try GBFSPlans.parse(doc(#"{"plan_id":"k","name":"K","currency":"KRW","price":500.0,"is_taxable":false,"description":"d","per_min_pricing":[{"start":0,"rate":180,"interval":1}]}"#))
        #expect(p[0].price == 500 && p[0].perMinute[0].rate == 180)
    }

    @Test func threeDecimalCurrency() throws {
        let p = try GBFSPlans.parse(doc(#"{"plan_id":"k","name":"K","currency":"KWD","price":0.125,"is_taxable":false,"description":"d"}"#))
        #expect(p[0].price == 125)
    }

    @Test func extensionFields() throws {
        let p = try GBFSPlans.parse(doc(#"""
            {"plan_id":"paused","name":[{"text":"Pause","language":"en"},{"text":"일시정지","language":"ko"}],
             "currency":"KRW","price":1000,"is_taxable":false,"description":[],
             "per_min_pricing":[{"start":0,"rate":150,"interval":1}],
             "_ridepush_billing":"completed","_ridepush_pause_rate":50,
             "_ridepush_max_pause":60,"_ridepush_max_ride":120,
             "_other_publisher_field":{"ignored":true},"url":"https://example.com/plans"}
            """#))
        #expect(p == [FarePlan(
            id: "paused", names: ["en": "Pause", "ko": "일시정지"], descriptions: [:], currency: .krw, price: 1000,
            perMinute: [FareSegment(start: 0, rate: 150, interval: 1)],
            billing: .completed, pauseRate: 50, maxPauseSeconds: 3600, maxRideSeconds: 7200)])
    }

    @Test func billingDefaultsToStarted() throws {
        let p = try GBFSPlans.parse(doc(#"{"plan_id":"s","name":"S","currency":"EUR","price":1,"is_taxable":false,"description":"d"}"#))
        #expect(p[0].billing == .started)
        #expect(p[0].pauseRate == 0 && p[0].maxPauseSeconds == nil && p[0].maxRideSeconds == nil)
    }

    @Test func undIsTheUnknownLanguage() throws {
        let p = try GBFSPlans.parse(doc(#"{"plan_id":"u","name":[{"text":"U","language":"und"}],"currency":"EUR","price":1,"is_taxable":false,"description":"d"}"#))
        #expect(p[0].names == ["": "U"])
    }

    @Test func emptyPlanList() throws {
        #expect(try GBFSPlans.parse(doc("")) == [])
        #expect(throws: PlanError.self) { try GBFSPlans.load(doc("")) }
        do { _ = try GBFSPlans.load(doc("")) } catch {
            #expect(error.description == "system_pricing_plans: data.plans: has no plans; give at least one (without --plans the built-in plan is used)")
        }
    }

    /// Issue 26: a plans file is published as given, and its own plan is the default.
    @Test func loadAddsNothingAndTheFirstPlanIsTheDefault() throws {
        let loaded = try GBFSPlans.load(bytes(specUSDText))
        #expect(loaded == (try GBFSPlans.parse(bytes(specUSDText))))
        #expect(loaded.map(\.id) == ["plan2"])
        #expect(FarePlan.defaultPlan(of: loaded).id == "plan2")
        #expect(FarePlan.defaultPlan(of: loaded).currency.code == "USD")
        #expect(FarePlan.defaultPlan(of: []) == .standard)
        #expect(FarePlan.defaultPlan(of: [.standard]) == .standard)
    }

    @Test func theMarkedPlanIsTheDefaultAndRoundTripsThroughTheDocument() throws {
        let two = doc(#"{"plan_id":"a","name":"A","currency":"EUR","price":1,"is_taxable":false,"description":"d"},"#
            + #"{"plan_id":"b","name":"B","currency":"EUR","price":2,"is_taxable":false,"description":"d","_ridepush_default":true}"#)
        let plans = try GBFSPlans.load(two)
        #expect(plans.map(\.id) == ["a", "b"])
        #expect(plans.map(\.isDefault) == [false, true])
        #expect(FarePlan.defaultPlan(of: plans).id == "b")
        let again = try GBFSPlans.parse(GBFSPlans.document(plans, lastUpdated: 0))
        #expect(again == plans)
        let text = String(decoding: GBFSPlans.document(plans, lastUpdated: 0), as: UTF8.self)
        #expect(text.components(separatedBy: "\"_ridepush_default\":true").count == 2, "written once, on b")
    }

    @Test func twoDefaultsOrANonBooleanMarkerAreRefused() throws {
        let both = doc(#"{"plan_id":"a","name":"A","currency":"EUR","price":1,"_ridepush_default":true},"#
            + #"{"plan_id":"b","name":"B","currency":"EUR","price":2,"_ridepush_default":true}"#)
        do { _ = try GBFSPlans.parse(both); Issue.record("accepted two defaults") } catch {
            #expect(error.description == #"plan "b": _ridepush_default: only one plan may be the default; "a" at data.plans[0] already is"#)
        }
        let text = doc(#"{"plan_id":"a","name":"A","currency":"EUR","price":1,"_ridepush_default":"yes"}"#)
        do { _ = try GBFSPlans.parse(text); Issue.record("accepted a string marker") } catch {
            #expect(error.description.hasPrefix(#"plan "a": _ridepush_default: must be true or false"#))
        }
    }
}

/// The repository's `plans.example.json` (what docs/fares.md shows) loads and bills as documented.
struct ExamplePlansFileTests {
    static func load() throws -> [FarePlan] {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("plans.example.json")
        let data = try #require(FileManager.default.contents(atPath: url.path))
        return try GBFSPlans.load(Array(data))
    }

    @Test func loads() throws {
        let plans = try Self.load()
        #expect(plans.map(\.id) == ["seoul-day", "seoul-completed", "plan2", "plan3", "tokyo-15", "berlin-first-ten-free"])
        #expect(FarePlan.defaultPlan(of: plans).id == "seoul-completed", "the file marks it _ridepush_default")
        let day = plans[0]
        #expect(day.billing == .started && day.pauseRate == 50)
        #expect(day.maxPauseSeconds == 1800 && day.maxRideSeconds == 10800)
    }

    @Test(arguments: [
        ("seoul-day", Int64(61), Int64(30), Int64(500 + 2 * 150 + 50)),
        ("seoul-completed", 119, 0, 700),
        ("tokyo-15", 0, 0, 0),
        ("tokyo-15", 900, 0, 130),
        ("tokyo-15", 901, 0, 260),
        ("tokyo-15", 10 * 3600, 0, 1800),
        ("berlin-first-ten-free", 600, 0, 100),
        ("berlin-first-ten-free", 601, 0, 130),
    ] as [(String, Int64, Int64, Int64)])
    func fares(_ id: String, _ riding: Int64, _ paused: Int64, _ fare: Int64) throws {
        let plan = try #require(try Self.load().first { $0.id == id })
        #expect(FareEngine.fare(plan, riding: riding, paused: paused) == fare)
    }
}

/// One malformed document and the exact message it must be refused with.
struct Malformed: CustomTestStringConvertible, Sendable {
    var label: String
    var document: [UInt8]
    var message: String
    var testDescription: String { label }

    init(_ label: String, plan: String, _ message: String) {
        self.label = label
        self.document = doc(plan)
        self.message = message
    }

    init(_ label: String, document: String, _ message: String) {
        self.label = label
        self.document = bytes(document)
        self.message = message
    }
}

/// Valid fields to splice a broken one into.
fileprivate let ok = #""name":"N","is_taxable":false,"description":"d""#

struct GBFSRefusalTests {
    @Test(arguments: [
        Malformed("unknown currency", plan: #"{"plan_id":"bad-cur",\#(ok),"currency":"XYZ","price":1}"#,
                  #"plan "bad-cur": currency: "XYZ" is not a known ISO 4217 currency code"#),
        Malformed("missing currency", plan: #"{"plan_id":"x",\#(ok),"price":1}"#,
                  #"plan "x": currency: is required"#),
        Malformed("missing plan_id (named by index)",
                  plan: #"{"plan_id":"a",\#(ok),"currency":"USD","price":1},{\#(ok),"currency":"USD","price":1}"#,
                  #"data.plans[1]: plan_id: is required"#),
        Malformed("plan_id of the wrong type", plan: #"{"plan_id":7,\#(ok),"currency":"USD","price":1}"#,
                  #"data.plans[0]: plan_id: must be a string (got 7)"#),
        Malformed("plan_id with a space", plan: #"{"plan_id":"a b",\#(ok),"currency":"USD","price":1}"#,
                  #"data.plans[0]: plan_id: "a b" must be printable ASCII without spaces"#),
        Malformed("duplicate plan_id",
                  plan: #"{"plan_id":"dup",\#(ok),"currency":"USD","price":1},{"plan_id":"dup",\#(ok),"currency":"EUR","price":2}"#,
                  #"plan "dup": plan_id: duplicate of the plan at data.plans[0]"#),
        Malformed("rate with too many decimals",
                  plan: #"{"plan_id":"bad-usd",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":0,"rate":0.10,"interval":1},{"start":5,"rate":0.005,"interval":1}]}"#,
                  #"plan "bad-usd": per_min_pricing[1].rate: 0.005 has more decimals than USD allows (2)"#),
        Malformed("KRW price with decimals", plan: #"{"plan_id":"krw",\#(ok),"currency":"KRW","price":500.5}"#,
                  #"plan "krw": price: 500.5 has more decimals than KRW allows (0)"#),
        Malformed("cap price with too many decimals",
                  plan: #"{"plan_id":"c",\#(ok),"currency":"CAD","price":3,"fare_capping":{"duration":720,"price":15.001}}"#,
                  #"plan "c": fare_capping.price: 15.001 has more decimals than CAD allows (2)"#),
        Malformed("negative interval",
                  plan: #"{"plan_id":"neg",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":0,"rate":0.10,"interval":-1}]}"#,
                  #"plan "neg": per_min_pricing[0].interval: must not be negative (got -1)"#),
        Malformed("negative start",
                  plan: #"{"plan_id":"neg",\#(ok),"currency":"USD","price":1,"per_km_pricing":[{"start":-5,"rate":0.10,"interval":1}]}"#,
                  #"plan "neg": per_km_pricing[0].start: must not be negative (got -5)"#),
        Malformed("end equal to start",
                  plan: #"{"plan_id":"e",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":30,"end":30,"rate":3,"interval":0}]}"#,
                  #"plan "e": per_min_pricing[0].end: 30 must be greater than start 30 (end is exclusive)"#),
        Malformed("end before start",
                  plan: #"{"plan_id":"e",\#(ok),"currency":"USD","price":1,"per_km_pricing":[{"start":10,"end":5,"rate":1,"interval":1}]}"#,
                  #"plan "e": per_km_pricing[0].end: 5 must be greater than start 10 (end is exclusive)"#),
        Malformed("segment without rate",
                  plan: #"{"plan_id":"s",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":0,"interval":1}]}"#,
                  #"plan "s": per_min_pricing[0].rate: is required"#),
        Malformed("start as a string",
                  plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":"0","rate":0.1,"interval":1}]}"#,
                  #"plan "t": per_min_pricing[0].start: must be an integer (got "0")"#),
        Malformed("fractional interval",
                  plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":0,"rate":0.1,"interval":1.5}]}"#,
                  #"plan "t": per_min_pricing[0].interval: must be an integer (got 1.5)"#),
        Malformed("rate as a string",
                  plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":0,"rate":"0.10","interval":1}]}"#,
                  #"plan "t": per_min_pricing[0].rate: must be a decimal number (got "0.10")"#),
        Malformed("segments not an array",
                  plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1,"per_min_pricing":{"start":0}}"#,
                  #"plan "t": per_min_pricing: must be an array (got an object)"#),
        Malformed("price as a boolean", plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":true}"#,
                  #"plan "t": price: must be a decimal number or a decimal string (got true)"#),
        Malformed("missing price", plan: #"{"plan_id":"t",\#(ok),"currency":"USD"}"#,
                  #"plan "t": price: is required"#),
        Malformed("negative price", plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":-1.00}"#,
                  #"plan "t": price: must not be negative (got -1.00)"#),
        Malformed("exponent notation", plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":2e2}"#,
                  #"plan "t": price: 2e2 is not a plain decimal number (write it like 1.50)"#),
        Malformed("price string with a comma", plan: #"{"plan_id":"t",\#(ok),"currency":"EUR","price":"2,00"}"#,
                  #"plan "t": price: "2,00" is not a plain decimal number (write it like 1.50)"#),
        Malformed("price too large", plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1000000000000}"#,
                  #"plan "t": price: 1000000000000 is too large (at most 1000000000.00 USD)"#),
        Malformed("start too large",
                  plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":2000000000,"rate":0.1,"interval":1}]}"#,
                  #"plan "t": per_min_pricing[0].start: 2000000000 is too large (at most 1000000000)"#),
        Malformed("is_taxable as a string",
                  plan: #"{"plan_id":"t","name":"N","description":"d","currency":"USD","price":1,"is_taxable":"true"}"#,
                  #"plan "t": is_taxable: must be true or false (got "true")"#),
        Malformed("name as a number",
                  plan: #"{"plan_id":"t","name":5,"description":"d","is_taxable":false,"currency":"USD","price":1}"#,
                  #"plan "t": name: must be a string or an array of {text, language} (got 5)"#),
        Malformed("localized name without language",
                  plan: #"{"plan_id":"t","name":[{"text":"N"}],"description":"d","is_taxable":false,"currency":"USD","price":1}"#,
                  #"plan "t": name[0].language: is required"#),
        Malformed("localized description repeating a language",
                  plan: #"{"plan_id":"t","name":"N","description":[{"text":"a","language":"en"},{"text":"b","language":"en"}],"is_taxable":false,"currency":"USD","price":1}"#,
                  #"plan "t": description[1].language: "en" appears twice"#),
        Malformed("surge_pricing as a string",
                  plan: #"{"plan_id":"t",\#(ok),"currency":"USD","price":1,"surge_pricing":"no"}"#,
                  #"plan "t": surge_pricing: must be true or false (got "no")"#),
        Malformed("fare_capping of 0 minutes",
                  plan: #"{"plan_id":"c",\#(ok),"currency":"CAD","price":3,"fare_capping":{"duration":0,"price":15.00}}"#,
                  #"plan "c": fare_capping.duration: must be at least 1 (got 0)"#),
        Malformed("fare_capping without price",
                  plan: #"{"plan_id":"c",\#(ok),"currency":"CAD","price":3,"fare_capping":{"duration":720}}"#,
                  #"plan "c": fare_capping.price: is required"#),
        Malformed("fare_capping as a number",
                  plan: #"{"plan_id":"c",\#(ok),"currency":"CAD","price":3,"fare_capping":15}"#,
                  #"plan "c": fare_capping: must be an object {duration, price} (got 15)"#),
        Malformed("unknown billing rule",
                  plan: #"{"plan_id":"b",\#(ok),"currency":"USD","price":1,"_ridepush_billing":"rounded"}"#,
                  #"plan "b": _ridepush_billing: must be "started" or "completed" (got "rounded")"#),
        Malformed("misspelt extension field",
                  plan: #"{"plan_id":"b",\#(ok),"currency":"USD","price":1,"_ridepush_biling":"completed"}"#,
                  #"plan "b": _ridepush_biling: unknown RidePush extension field (known: _ridepush_billing, _ridepush_default, _ridepush_max_pause, _ridepush_max_ride, _ridepush_pause_rate)"#),
        Malformed("negative pause rate",
                  plan: #"{"plan_id":"p",\#(ok),"currency":"USD","price":1,"_ridepush_pause_rate":-0.10}"#,
                  #"plan "p": _ridepush_pause_rate: must not be negative (got -0.10)"#),
        Malformed("pause rate with too many decimals",
                  plan: #"{"plan_id":"p",\#(ok),"currency":"JPY","price":100,"_ridepush_pause_rate":0.5}"#,
                  #"plan "p": _ridepush_pause_rate: 0.5 has more decimals than JPY allows (0)"#),
        Malformed("max pause of 0 minutes",
                  plan: #"{"plan_id":"p",\#(ok),"currency":"USD","price":1,"_ridepush_max_pause":0}"#,
                  #"plan "p": _ridepush_max_pause: must be at least 1 (got 0)"#),
        Malformed("max ride as a string",
                  plan: #"{"plan_id":"p",\#(ok),"currency":"USD","price":1,"_ridepush_max_ride":"60"}"#,
                  #"plan "p": _ridepush_max_ride: must be an integer (got "60")"#),
        Malformed("plan not an object", plan: "3",
                  #"data.plans[0]: must be an object (got 3)"#),
        Malformed("no data.plans", document: #"{"last_updated":0,"ttl":0,"version":"3.1-RC3","data":{}}"#,
                  #"system_pricing_plans: data.plans: is required"#),
        Malformed("data.plans not an array", document: #"{"data":{"plans":{}}}"#,
                  #"system_pricing_plans: data.plans: must be an array (got an object)"#),
        Malformed("no data", document: #"{"last_updated":0,"ttl":0,"version":"3.1-RC3"}"#,
                  #"system_pricing_plans: data: is required"#),
        Malformed("last_updated of the wrong type", document: #"{"last_updated":true,"data":{"plans":[]}}"#,
                  #"system_pricing_plans: last_updated: must be a POSIX integer or an RFC 3339 string (got true)"#),
        Malformed("not JSON", document: #"{"data": {"plans": [}"#,
                  #"system_pricing_plans: invalid JSON at line 1, column 21: expected a value"#),
        Malformed("top level not an object", document: "[]",
                  #"system_pricing_plans: must be a JSON object (got an array)"#),
    ])
    func refused(_ m: Malformed) {
        #expect(refusal(m.document) == m.message)
    }

    @Test func errorCarriesPlanAndField() {
        do {
            _ = try GBFSPlans.parse(doc(#"{"plan_id":"bad-usd",\#(ok),"currency":"USD","price":1,"per_min_pricing":[{"start":0,"rate":0.10,"interval":1},{"start":5,"rate":0.005,"interval":1}]}"#))
            Issue.record("accepted")
        } catch {
            #expect(error.plan == "bad-usd")
            #expect(error.index == 0)
            #expect(error.field == "per_min_pricing[1].rate")
        }
    }
}

struct GBFSDocumentTests {
    /// Plans exercising every field `document` writes.
    static let plans: [FarePlan] = [
        .standard,
        FarePlan(id: "plan2", names: ["en": "One-Way"],
                 descriptions: ["en": "First half-hour: $2, second half-hour: $3, beyond one hour: $0.10/min"],
                 currency: usd, price: 200,
                 perMinute: [FareSegment(start: 30, rate: 300, interval: 0, end: 60),
                             FareSegment(start: 60, rate: 10, interval: 1)]),
        FarePlan(id: "plan3", names: ["en": "Simple Rate", "fr": "Tarif simple"], currency: cad, price: 300, isTaxable: true,
                 perMinute: [FareSegment(start: 0, rate: 50, interval: 1)],
                 perKm: [FareSegment(start: 0, rate: 25, interval: 1)],
                 cap: FareCap(duration: 720, price: 1500)),
        FarePlan(id: "v2-style", names: ["": "Plain \"quoted\" name\n"], descriptions: ["": "no language"],
                 currency: Currency(code: "EUR")!, price: 0,
                 perMinute: [FareSegment(start: 0, rate: 30, interval: 1),
                             FareSegment(start: 0, rate: -30, interval: 1, end: 10)],
                 surgePricing: true, billing: .completed, pauseRate: 5, maxPauseSeconds: 3600, maxRideSeconds: 7200),
        FarePlan(id: "kwd", names: [:], currency: Currency(code: "KWD")!, price: 125,
                 perKm: [FareSegment(start: 2, rate: 1005, interval: 3, end: 20)]),
    ]

    @Test func roundTrip() throws {
        let out = GBFSPlans.document(Self.plans, lastUpdated: 1_700_000_000)
        #expect(try GBFSPlans.parse(out) == Self.plans)
    }

    @Test(arguments: GBFSDocumentTests.plans)
    func roundTripEach(_ plan: FarePlan) throws {
        #expect(try GBFSPlans.parse(GBFSPlans.document([plan], lastUpdated: 0)) == [plan])
    }

    /// The spec's own example documents survive parse → document → parse.
    @Test(arguments: [specUSDText, specCADText, specV22Text])
    func specExamplesRoundTrip(_ text: String) throws {
        let plans = try GBFSPlans.parse(bytes(text))
        #expect(try GBFSPlans.parse(GBFSPlans.document(plans, lastUpdated: 1_609_866_247)) == plans)
    }

    /// The exact text, pinned: amounts as JSON numbers with the currency's decimals.
    @Test func exactText() {
        let p = FarePlan(id: "p", names: ["en": "P"], currency: usd, price: 200,
                         perMinute: [FareSegment(start: 0, rate: 10, interval: 1)],
                         cap: FareCap(duration: 60, price: 500))
        let text = String(decoding: GBFSPlans.document([p], lastUpdated: 1_700_000_000), as: UTF8.self)
        #expect(text == #"{"last_updated":"2023-11-14T22:13:20Z","ttl":0,"version":"3.1-RC3","data":{"plans":[{"plan_id":"p","name":[{"text":"P","language":"en"}],"currency":"USD","price":2.00,"is_taxable":false,"description":[],"per_min_pricing":[{"start":0,"rate":0.10,"interval":1}],"fare_capping":{"duration":60,"price":5.00},"_ridepush_billing":"started"}]}}"#)
    }

    @Test func standardPlanText() {
        let text = String(decoding: GBFSPlans.document([.standard], lastUpdated: 0), as: UTF8.self)
        #expect(text == #"{"last_updated":"1970-01-01T00:00:00Z","ttl":0,"version":"3.1-RC3","data":{"plans":[{"plan_id":"default","name":[{"text":"Standard","language":"en"},{"text":"기본 요금","language":"ko"}],"currency":"KRW","price":500,"is_taxable":false,"description":[{"text":"500 KRW unlock + 180 KRW per minute","language":"en"},{"text":"기본 500원 + 분당 180원","language":"ko"}],"per_min_pricing":[{"start":0,"rate":180,"interval":1}],"_ridepush_billing":"completed"}]}}"#)
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (1_609_866_247, "2021-01-05T17:04:07Z"),
        (1_700_000_000, "2023-11-14T22:13:20Z"),
        (4_107_542_399, "2100-02-28T23:59:59Z"),
        (4_107_542_400, "2100-03-01T00:00:00Z"),
    ])
    func rfc3339(_ seconds: Int64, _ text: String) {
        #expect(GBFSPlans.rfc3339(seconds) == text)
    }
}
