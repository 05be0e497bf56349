// LoopbackMesh: member j listens, every lower member dials it; both ends authenticate.
#include "collective/mesh.h"

#include <thread>

namespace shoal::collective {

Result<Mesh> LoopbackMesh(int members, const net::ClusterKey& key, int64_t timeout_ms) {
  if (members < 1) return Errorf("a mesh of {} members", members);
  const auto m = static_cast<size_t>(members);
  Mesh links(m, std::vector<std::shared_ptr<net::Conn>>(m));
  for (size_t j = 1; j < m; ++j) {
    SHOAL_ASSIGN_OR_RETURN(auto lis, net::Listener::Listen("127.0.0.1", 0));
    for (size_t i = 0; i < j; ++i) {
      Status accepted_status = Errorf("no connection accepted");
      std::shared_ptr<net::Conn> accepted;
      std::thread acc([&] {
        auto c = lis->Accept(timeout_ms);
        if (!c.ok()) {
          accepted_status = c.status();
        } else if (*c) {
          accepted_status = net::AuthenticateAcceptor(**c, key);
          accepted = std::move(*c);
        }
      });
      auto d = net::ConnectAuthenticated("127.0.0.1", lis->port(), key, timeout_ms);
      acc.join();
      if (!d.ok()) return d.status().Annotate("mesh link " + std::to_string(i));
      SHOAL_RETURN_IF_ERROR(accepted_status);
      links[i][j] = std::move(*d);
      links[j][i] = std::move(accepted);
    }
  }
  return links;
}

}  // namespace shoal::collective
