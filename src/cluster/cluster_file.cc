// Cluster file parsing with toml++ (header-only, exceptions off: errors come back as values).
#include "cluster/cluster_file.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include "base/units.h"

namespace shoal::cluster {

namespace {

std::string Where(const toml::node& n, const std::string& origin) {
  const toml::source_region& s = n.source();
  return fmt::format("{}:{}:{}", origin, s.begin.line, s.begin.column);
}

Status CheckKeys(const toml::table& t, std::initializer_list<std::string_view> known,
                 const std::string& what, const std::string& origin) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (std::string_view kk : known) ok = ok || k.str() == kk;
    if (!ok) return Errorf("{}: unknown key '{}' in {}", Where(v, origin), k.str(), what);
  }
  return Status::Ok();
}

Result<std::string> GetString(const toml::table& t, std::string_view key,
                              const std::string& origin) {
  const toml::node* n = t.get(key);
  if (!n) return std::string();
  if (!n->is_string()) return Errorf("{}: '{}' must be a string", Where(*n, origin), key);
  return std::string(n->as_string()->get());
}

Result<double> GetNumber(const toml::table& t, std::string_view key, const std::string& origin) {
  const toml::node* n = t.get(key);
  if (!n) return 0.0;
  double v = 0;
  if (n->is_integer()) {
    v = static_cast<double>(n->as_integer()->get());
  } else if (n->is_floating_point()) {
    v = n->as_floating_point()->get();
  } else {
    return Errorf("{}: '{}' must be a number", Where(*n, origin), key);
  }
  if (!(v >= 0) || !std::isfinite(v))
    return Errorf("{}: '{}' must be a finite number >= 0", Where(*n, origin), key);
  return v;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return Errorf("cannot parse size '{}' (use e.g. 256M or 2G)", s);
  double v = 0;
  try {
    v = std::stod(std::string(s.substr(0, i)));
  } catch (...) {
    return Errorf("cannot parse size '{}'", s);
  }
  const std::optional<double> unit = ByteUnitMultiplier(s.substr(i));
  if (!unit) return Errorf("unknown unit in size '{}'", s);
  const double mul = *unit;
  if (!(v > 0) || !std::isfinite(v * mul) || v * mul > 1.8e19)
    return Errorf("size '{}' out of range", s);
  return static_cast<uint64_t>(v * mul);
}

Result<ClusterFile> ParseClusterFile(std::string_view text, const std::string& base_dir,
                                     const std::string& origin) {
  toml::parse_result parsed = toml::parse(text, origin);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return Errorf("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column,
                  e.description());
  }
  const toml::table& t = parsed.table();
  SHOAL_RETURN_IF_ERROR(
      CheckKeys(t, {"key_file", "link_dtype", "node"}, "the cluster file", origin));
  ClusterFile cf;
  SHOAL_ASSIGN_OR_RETURN(cf.key_file, GetString(t, "key_file", origin));
  if (!cf.key_file.empty() && cf.key_file[0] != '/' && !base_dir.empty())
    cf.key_file = base_dir + "/" + cf.key_file;
  SHOAL_ASSIGN_OR_RETURN(cf.link_dtype, GetString(t, "link_dtype", origin));
  const toml::node* nodes = t.get("node");
  if (!nodes) return Errorf("{}: no [[node]] entries", origin);
  if (!nodes->is_array_of_tables())
    return Errorf("{}: 'node' must be an array of tables ([[node]])", Where(*nodes, origin));
  for (const toml::node& n : *nodes->as_array()) {
    const toml::table& nt = *n.as_table();
    SHOAL_RETURN_IF_ERROR(CheckKeys(
        nt, {"address", "name", "mem_limit", "link_bandwidth_mbit", "link_latency_ms", "standby"},
        "[[node]]", origin));
    SHOAL_ASSIGN_OR_RETURN(std::string addr, GetString(nt, "address", origin));
    if (addr.empty()) return Errorf("{}: [[node]] without an address", Where(n, origin));
    NodeOverride o;
    SHOAL_ASSIGN_OR_RETURN(o.name, GetString(nt, "name", origin));
    if (const toml::node* m = nt.get("mem_limit")) {
      if (m->is_integer() && m->as_integer()->get() > 0) {
        o.mem_limit = static_cast<uint64_t>(m->as_integer()->get());
      } else if (m->is_string()) {
        auto b = ParseByteSize(m->as_string()->get());
        if (!b.ok()) return b.status().Annotate(Where(*m, origin));
        o.mem_limit = *b;
      } else {
        return Errorf("{}: mem_limit must be a size such as \"256M\" or a positive byte count",
                      Where(*m, origin));
      }
    }
    SHOAL_ASSIGN_OR_RETURN(double mbit, GetNumber(nt, "link_bandwidth_mbit", origin));
    SHOAL_ASSIGN_OR_RETURN(double ms, GetNumber(nt, "link_latency_ms", origin));
    o.link_bw = mbit * 1e6 / 8;
    o.link_latency_s = ms * 1e-3;
    bool standby = false;
    if (const toml::node* sb = nt.get("standby")) {
      if (!sb->is_boolean())
        return Errorf("{}: 'standby' must be true or false", Where(*sb, origin));
      standby = sb->as_boolean()->get();
    }
    (standby ? cf.standby : cf.nodes).push_back(std::move(addr));
    (standby ? cf.standby_overrides : cf.overrides).push_back(std::move(o));
  }
  return cf;
}

Result<ClusterFile> LoadClusterFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Errorf("{}: cannot open the cluster file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  const size_t slash = path.find_last_of('/');
  return ParseClusterFile(ss.str(), slash == std::string::npos ? "." : path.substr(0, slash), path);
}

}  // namespace shoal::cluster
