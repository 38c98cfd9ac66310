import Foundation

/// Keys made by the openssl command for this test run (nothing committed): the private half as
/// PKCS #8 PEM, as Apple's .p8 and Google's service-account JSON hold it, and the public half
/// for RideAuth's verifier.
struct TestKey {
    let privatePEM: String
    let publicPEM: String

    static let p256 = TestKey(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
    static let rsa = TestKey(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
    static let p384 = TestKey(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])

    private init(_ generate: [String]) {
        privatePEM = Self.openssl(generate, input: nil)
        publicPEM = Self.openssl(["pkey", "-pubout"], input: privatePEM)
    }

    private static func openssl(_ arguments: [String], input: String?) -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = arguments
        let out = Pipe()
        let inp = Pipe()
        p.standardOutput = out
        p.standardInput = inp
        do { try p.run() } catch { fatalError("openssl: \(error)") }
        if let input { inp.fileHandleForWriting.write(Data(input.utf8)) }
        try? inp.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        precondition(p.terminationStatus == 0, "openssl \(arguments) failed")
        return String(decoding: data, as: UTF8.self)
    }
}
