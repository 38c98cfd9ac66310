import Foundation
import XCTest
@testable import RideCore

/// The GPX track reader behind `ridepush ride simulate`: the hand-made fixture's exact points
/// and times, the pacing, and a line and column for every kind of bad input.
final class GPXTests: XCTestCase {
    static let fixture = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tests/fixtures/seoul-city-hall.gpx")

    let nine: Int64 = 1_796_374_800_000  // 2026-12-04T09:00:00Z (Python's datetime)

    func parse(_ s: String) throws -> [GPXPoint] { try GPX.trackPoints(Array(s.utf8)) }

    func error(_ s: String) -> GPXError? {
        do { _ = try GPX.trackPoints(Array(s.utf8)); return nil } catch { return error }
    }

    func testTheFixtureReadsToItsSixPointsWithTheirTimes() throws {
        let points = try GPX.trackPoints(Array(try Data(contentsOf: Self.fixture)))
        XCTAssertEqual(points, [
            GPXPoint(lat: 37.5665, lon: 126.978, time: nine, line: 8),
            GPXPoint(lat: 37.5666, lon: 126.9781, time: nine + 2000, line: 9),
            GPXPoint(lat: 37.5667, lon: 126.97825, time: nine + 4000, line: 10),
            GPXPoint(lat: 37.56685, lon: 126.9784, time: nine + 7500, line: 11),
            GPXPoint(lat: 37.567, lon: 126.9785, time: nine + 9500, line: 12),  // written as 18:00:09.5+09:00
            GPXPoint(lat: 37.5671, lon: 126.9786, time: nil, line: 13),
        ])
        // The recorded gaps, then 1 s for the point without a time; --speed divides them.
        XCTAssertEqual(try GPX.schedule(points, speed: 1), [0, 2000, 4000, 7500, 9500, 10_500])
        XCTAssertEqual(try GPX.schedule(points, speed: 10), [0, 200, 400, 750, 950, 1050])
        XCTAssertEqual(try GPX.schedule(points, speed: 0.5), [0, 4000, 8000, 15_000, 19_000, 21_000])
    }

    func testPointsWithoutTimesAreOneSecondApart() throws {
        let points = try parse(#"<gpx><trk><trkseg><trkpt lat="1" lon="2"/><trkpt lat="1.001" lon="2"></trkpt><trkpt lat='1.002' lon='2'/></trkseg></trk></gpx>"#)
        XCTAssertEqual(points.map(\.time), [nil, nil, nil])
        XCTAssertEqual(try GPX.schedule(points, speed: 1), [0, 1000, 2000])
        XCTAssertEqual(try GPX.schedule(points, speed: 4), [0, 250, 500])
    }

    func testOnlyTrackPointsCountAndNamespacesAndMarkupAreSkipped() throws {
        let text = """
            <?xml version="1.0"?>
            <!DOCTYPE gpx>
            <g:gpx xmlns:g="http://www.topografix.com/GPX/1/1">
              <wpt lat="10" lon="10"><time>2026-12-04T09:00:00Z</time></wpt>
              <rte><rtept lat="11" lon="11"/></rte>
              <g:trk><g:trkseg>
                <g:trkpt lat="37.5" lon="127.0"><!-- a <comment> --><g:time><![CDATA[2026-12-04T09:00:01Z]]></g:time></g:trkpt>
              </g:trkseg></g:trk>
            </g:gpx>
            """
        XCTAssertEqual(try parse(text), [GPXPoint(lat: 37.5, lon: 127.0, time: nine + 1000, line: 7)])
    }

    func testTimesInTheFormsGPXFilesUse() {
        func t(_ s: String) -> Int64? { GPX.parseTime(Array(s.utf8)) }
        XCTAssertEqual(t("2026-12-04T09:00:00Z"), nine)
        XCTAssertEqual(t(" 2026-12-04T09:00:00.123456Z\n"), nine + 123)
        XCTAssertEqual(t("2026-12-04T10:30:00+01:30"), nine)
        XCTAssertEqual(t("2026-12-04T05:00:00-04:00"), nine)
        XCTAssertEqual(t("2026-12-04T09:00:00"), nine, "no zone: UTC, as GPX says")
        XCTAssertEqual(t("2000-02-29T23:59:59Z"), 951_868_799_000)
        XCTAssertNil(t("2026-12-04 09:00"))
        XCTAssertNil(t("2026-13-04T09:00:00Z"))
        XCTAssertNil(t("2026-12-04T09:00:00Zjunk"))
        XCTAssertNil(t("yesterday"))
    }

    func testMalformedInputNamesTheLineAndColumn() {
        XCTAssertEqual(error("<gpx>\n <trk>\n  <trkseg>\n  </trk>\n</gpx>")?.description,
                       "line 4, column 3: </trk> where </trkseg> was expected (opened at line 3, column 3)")
        XCTAssertEqual(error("<gpx>\n<trk><trkseg>\n<trkpt lat=\"37.5\"/>\n</trkseg></trk></gpx>")?.description,
                       "line 3, column 1: <trkpt> needs both lat and lon attributes")
        XCTAssertEqual(error("<gpx><trk><trkseg>\n<trkpt lat=\"91\" lon=\"0\"/></trkseg></trk></gpx>")?.description,
                       "line 2, column 1: <trkpt> lat \"91\" is not a latitude from -90 to 90")
        XCTAssertEqual(error("<gpx><trk><trkseg>\n  <trkpt lat=\"1\" lon=\"2\">\n    <time>noon</time></trkpt></trkseg></trk></gpx>")?.description,
                       "line 3, column 5: <time> \"noon\" is not an ISO 8601 UTC time such as 2026-12-04T09:00:00Z")
        XCTAssertEqual(error("<gpx>\n<trk>\n")?.description, "line 3, column 1: the file ends inside <trk> (opened at line 2, column 1)")
        XCTAssertEqual(error("<gpx><trkpt lat=1 lon=2/></gpx>")?.description, "line 1, column 17: the value of lat in <trkpt> must be quoted")
        XCTAssertEqual(error("{\"type\":\"FeatureCollection\"}")?.description, "line 1, column 29: no <gpx> element: not a GPX file")
        XCTAssertEqual(error("<kml></kml>")?.description, "line 1, column 1: the root element is <kml>, not <gpx>: not a GPX file")
        XCTAssertEqual(error("<gpx><!-- open")?.description, "line 1, column 6: a comment is not closed with -->")
    }

    func testATimeThatGoesBackIsRefusedWithItsLine() throws {
        let points = try parse("""
            <gpx><trk><trkseg>
            <trkpt lat="1" lon="2"><time>2026-12-04T09:00:05Z</time></trkpt>
            <trkpt lat="1" lon="2.001"><time>2026-12-04T09:00:02Z</time></trkpt>
            </trkseg></trk></gpx>
            """)
        XCTAssertThrowsError(try GPX.schedule(points, speed: 1)) { e in
            XCTAssertEqual((e as? GPXError)?.description, "line 3, column 1: <time> goes back 3000 ms from the previous point's (line 2)")
        }
    }
}
