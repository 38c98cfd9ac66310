import Foundation
import RideCore
import RideProtocol
import Testing
@testable import RideDevicePush

// The requests to APNs and FCM, byte for byte, and what each answer makes the sender do.

fileprivate let riding = RideActivityContent(ride: "r-42", state: .riding, elapsed: 192, at: 1_764_430_192_750, fare: 1040,
                                             currency: "KRW", fareNext: 1220, fareNextAt: 1_764_430_240_000, limitAt: 1_764_431_800_000)
fileprivate let ended = RideActivityContent(ride: "r-43", state: .ended, elapsed: 192, at: 1_764_430_192_750, fare: 1040, currency: "KRW")
fileprivate let token = String(repeating: "7b1f", count: 16)
fileprivate func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

@Suite struct APNsRequestTests {
    @Test func anUpdateAtPriorityFiveWithItsStaleDate() throws {
        let push = DevicePush(event: .update, priority: .opportunistic, content: riding, staleDate: 1_764_430_245)
        let r = try APNsRequest(push, token: token, bundleID: "com.example.ride", expiration: 1_764_430_245)
        #expect(r.path == "/3/device/" + token)
        #expect(r.headers == [.init("apns-push-type", "liveactivity"), .init("apns-topic", "com.example.ride.push-type.liveactivity"),
                              .init("apns-priority", "5"), .init("apns-expiration", "1764430245")])
        #expect(text(r.body) == #"{"aps":{"timestamp":1764430192,"event":"update","content-state":"#
            + text(riding.json()) + #","stale-date":1764430245}}"#)
    }

    @Test func anEndWithItsDismissalDate() throws {
        let push = DevicePush(event: .end, priority: .immediate, content: ended, dismissalDate: 1_764_431_093)
        let r = try APNsRequest(push, token: token, bundleID: "com.example.ride", expiration: 0)
        #expect(r.headers[2] == .init("apns-priority", "10"))
        #expect(text(r.body) == #"{"aps":{"timestamp":1764430192,"event":"end","content-state":{"at":1764430192750,"currency":"KRW","elapsed":192,"fare":1040,"ride":"r-43","state":"ended"},"dismissal-date":1764431093}}"#)
    }

    @Test func aPushToStartNamesTheAttributesAndLightsTheScreen() throws {
        let push = DevicePush(event: .start, priority: .immediate, content: riding, alert: .init(title: "Ride started", body: "r-42 · Standard"),
                              attributes: .init(ride: "r-42", planName: "Standard"))
        let body = text(try APNsRequest(push, token: token, bundleID: "b", expiration: 0).body)
        #expect(body.hasSuffix(#","alert":{"title":"Ride started","body":"r-42 · Standard","sound":"default"},"attributes-type":"RideAttributes","attributes":{"ride":"r-42","plan":"Standard"}}}"#))
        #expect(body.hasPrefix(#"{"aps":{"timestamp":1764430192,"event":"start","content-state":{"#))
    }

    @Test func aBodyOverFourKilobytesIsRefused() {
        var big = riding
        big.zone = .init(name: String(repeating: "x", count: 3828), endAllowed: true)
        let push = DevicePush(event: .update, priority: .immediate, content: big)
        #expect(throws: APNsRequest.BuildError.tooLarge(4097)) { try APNsRequest(push, token: token, bundleID: "b", expiration: 0) }
        big.zone = .init(name: String(repeating: "x", count: 3827), endAllowed: true)
        #expect((try? APNsRequest(DevicePush(event: .update, priority: .immediate, content: big), token: token, bundleID: "b", expiration: 0))?.body.count == 4096)
    }

    @Test(arguments: [
        (Optional(200), "", PushVerdict.delivered),
        (410, #"{"reason":"Unregistered","timestamp":1764430000000}"#, .dropTarget(reason: "Unregistered")),
        (410, #"{"reason":"ExpiredToken"}"#, .dropTarget(reason: "ExpiredToken")),
        (400, #"{"reason":"BadDeviceToken"}"#, .dropTarget(reason: "BadDeviceToken")),
        (403, #"{"reason":"ExpiredProviderToken"}"#, .renewCredentials),
        (403, #"{"reason":"InvalidProviderToken"}"#, .failed(reason: "403 InvalidProviderToken")),
        (413, #"{"reason":"PayloadTooLarge"}"#, .failed(reason: "413 PayloadTooLarge")),
        (400, #"{"reason":"TopicDisallowed"}"#, .failed(reason: "400 TopicDisallowed")),
        (429, #"{"reason":"TooManyRequests"}"#, .retry(retryAfter: nil)),
        (500, #"{"reason":"InternalServerError"}"#, .retry(retryAfter: nil)),
        (503, "", .retry(retryAfter: nil)),
        (nil, "", .retry(retryAfter: nil)),
    ] as [(Int?, String, PushVerdict)])
    func apnsAnswers(_ status: Int?, _ body: String, _ verdict: PushVerdict) {
        #expect(APNsAnswer.verdict(status: status, body: Array(body.utf8)) == verdict)
    }
}

@Suite struct FCMMessageTests {
    @Test func theMessageWithEveryDataValueAString() throws {
        var c = riding
        c.zone = .init(name: "Trocadéro", endAllowed: false)
        let push = DevicePush(event: .update, priority: .immediate, content: c, alert: .init(title: "5 min left", body: "r-42"))
        let body = FCMMessage.body(push, token: "fcm:tok", ttl: 600)
        #expect(text(body) == #"{"message":{"token":"fcm:tok","android":{"priority":"high","ttl":"600s","collapse_key":"r-42"},"data":{"event":"update","ride":"r-42","state":"riding","elapsed":"192","at":"1764430192750","fare":"1040","currency":"KRW","fare_next":"1220","fare_next_at":"1764430240000","limit_at":"1764431800000","zone":"Trocadéro","zone_end_allowed":"false","alert_title":"5 min left","alert_body":"r-42"}}}"#)
        let data = try #require((try JSON.parse(body))["message"]?["data"]?.object)
        #expect(data.values.allSatisfy { $0.string != nil })
        #expect(FCMMessage.path(project: "ridepush-demo") == "/v1/projects/ridepush-demo/messages:send")
        let low = FCMMessage.body(DevicePush(event: .end, priority: .opportunistic, content: ended), token: "t", ttl: 0)
        #expect(text(low).contains(#""android":{"priority":"normal","ttl":"0s","collapse_key":"r-43"}"#))
    }

    @Test(arguments: [
        (Optional(200), "", Optional<String>.none, PushVerdict.delivered),
        (404, #"{"error":{"code":404,"status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#, nil, .dropTarget(reason: "UNREGISTERED")),
        (401, #"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#, nil, .renewCredentials),
        (429, "", "30", .retry(retryAfter: 30_000)),
        (503, "", nil, .retry(retryAfter: nil)),
        (503, "", "Wed, 21 Oct 2026 07:28:00 GMT", .retry(retryAfter: nil)),
        (500, "", nil, .retry(retryAfter: nil)),
        (nil, "", nil, .retry(retryAfter: nil)),
        (400, #"{"error":{"code":400,"status":"INVALID_ARGUMENT","details":[{"errorCode":"INVALID_ARGUMENT"}]}}"#, nil, .failed(reason: "400 INVALID_ARGUMENT")),
        (403, #"{"error":{"code":403,"status":"PERMISSION_DENIED"}}"#, nil, .failed(reason: "403 PERMISSION_DENIED")),
    ] as [(Int?, String, String?, PushVerdict)])
    func fcmAnswers(_ status: Int?, _ body: String, _ retryAfter: String?, _ verdict: PushVerdict) {
        #expect(FCMAnswer.verdict(status: status, body: Array(body.utf8), retryAfter: retryAfter) == verdict)
    }

    @Test func theBackoffDoublesFromOneSecondUpToItsCap() {
        let b = PushBackoff(first: 1_000, cap: 30_000)
        #expect((1...7).map { b.delay(afterAttempt: $0) } == [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000])
        #expect(b.delay(afterAttempt: 10_000) == 30_000)
    }
}
