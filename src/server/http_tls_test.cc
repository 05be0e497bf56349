// HttpServer over TLS: a self-signed certificate made here with OpenSSL, a minimal OpenSSL
// client, load errors that name the file, and a plain-HTTP or silent client that is closed.
#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <filesystem>

#include "server/http_test_util.h"

namespace shoal::server {
namespace {

using testing::Client;
using testing::SecondsSince;
using testing::StatusOf;
using testing::TestServer;

// Writes a self-signed P-256 certificate for "localhost" and its key as PEM files.
bool MakeSelfSigned(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  bool ok = key && x;
  if (ok) {
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    ok = X509_sign(x, key, EVP_sha256()) > 0;
  }
  if (ok) {
    FILE* c = std::fopen(cert_path.c_str(), "w");
    FILE* k = std::fopen(key_path.c_str(), "w");
    ok = c && k && PEM_write_X509(c, x) == 1 &&
         PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    if (c) std::fclose(c);
    if (k) std::fclose(k);
  }
  X509_free(x);
  EVP_PKEY_free(key);
  return ok;
}

// One HTTPS request on a fresh connection (no certificate check: the test made it); the reply.
std::string TlsRoundtrip(int port, const std::string& request) {
  Client c(port);
  if (c.fd() < 0) return "";
  timeval tv{5, 0};
  ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, c.fd());
  SSL_set_tlsext_host_name(ssl, "localhost");
  std::string out;
  if (SSL_connect(ssl) == 1 &&
      SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
    char buf[4096];
    for (int n; (n = SSL_read(ssl, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return out;
}

class HttpServerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("shoal_tls_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    cert_ = (dir_ / "cert.pem").string();
    key_ = (dir_ / "key.pem").string();
    if (!MakeSelfSigned(cert_, key_)) GTEST_SKIP() << "OpenSSL could not make a certificate";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  HttpServerOptions Opts() {
    HttpServerOptions o;
    o.ssl_certfile = cert_;
    o.ssl_keyfile = key_;
    return o;
  }
  std::filesystem::path dir_;
  std::string cert_, key_;
};

HttpHandler Echo() {
  return [](const HttpRequest& r, std::shared_ptr<HttpExchange> ex) {
    ex->Respond(200, "text/plain", r.target == "/echo" ? r.body : "ok");
  };
}

TEST_F(HttpServerTlsTest, RoundTrip) {
  TestServer ts(Opts(), Echo());
  ASSERT_TRUE(ts.status().ok()) << ts.status().message();
  std::string r =
      TlsRoundtrip(ts.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(r), "200") << r;
  EXPECT_EQ(r.substr(r.size() - 2), "ok");
  const std::string body(100000, 'b');
  r = TlsRoundtrip(ts.port(),
                   "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(StatusOf(r), "200");
  EXPECT_EQ(r.size() - (r.find("\r\n\r\n") + 4), body.size());
  // Plain HTTP to the TLS port: no answer in clear, the connection closes, the server lives.
  Client c(ts.port());
  ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusOf(c.ReadAll(3000)), "");
  EXPECT_TRUE(c.eof());
  EXPECT_TRUE(ts.WaitConnections(0));
}

TEST_F(HttpServerTlsTest, SilentClientHitsTheHandshakeDeadline) {
  HttpServerOptions o = Opts();
  o.header_timeout_s = 1;
  TestServer ts(o, Echo());
  ASSERT_TRUE(ts.status().ok());
  Client c(ts.port());
  const auto t0 = std::chrono::steady_clock::now();
  c.ReadAll(5000);
  EXPECT_TRUE(c.eof());
  EXPECT_LT(SecondsSince(t0), 2.5);
}

TEST_F(HttpServerTlsTest, LoadErrorsNameTheFile) {
  HttpServerOptions o = Opts();
  o.ssl_certfile = (dir_ / "missing.pem").string();
  HttpServer a(o, Echo());
  Status s = a.Listen();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.pem"), std::string::npos) << s.message();

  o = Opts();
  o.ssl_keyfile = cert_;  // a certificate where the key should be
  HttpServer b(o, Echo());
  s = b.Listen();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(cert_), std::string::npos) << s.message();

  o = Opts();
  o.ssl_keyfile.clear();
  HttpServer c(o, Echo());
  s = c.Listen();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("key"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace shoal::server
