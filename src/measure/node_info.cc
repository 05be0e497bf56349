// NodeInfo validation and its JSON form.
#include "measure/node_info.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace shoal::measure {
namespace {

using nlohmann::json;

bool FiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

Status ReadString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_string()) return Errorf("node info: '{}' must be a string", key);
  *out = it->get<std::string>();
  return Status::Ok();
}

Status ReadDouble(const json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_number()) return Errorf("node info: '{}' must be a number", key);
  const double v = it->get<double>();
  if (!FiniteNonNegative(v)) return Errorf("node info: '{}' = {} is out of range", key, v);
  *out = v;
  return Status::Ok();
}

Status ReadUint(const json& j, const char* key, uint64_t max, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  uint64_t v = 0;
  if (it->is_number_unsigned()) {
    v = it->get<uint64_t>();
  } else if (it->is_number_integer() && it->get<int64_t>() >= 0) {
    v = static_cast<uint64_t>(it->get<int64_t>());
  } else {
    return Errorf("node info: '{}' must be a non-negative integer", key);
  }
  if (v > max) return Errorf("node info: '{}' = {} is out of range", key, v);
  *out = v;
  return Status::Ok();
}

// Interpolated in log2(tokens) over a table of 1, 2, 4, 8... tokens, its last entry beyond it.
double Interpolate(const std::vector<double>& table, double tokens) {
  const double x = std::log2(std::max(tokens, 1.0));
  const size_t i = static_cast<size_t>(x);
  if (i + 1 >= table.size()) return table.back();
  const double f = x - static_cast<double>(i);
  return (1 - f) * table[i] + f * table[i + 1];
}

// An array of positive rates at `key` (absent: left as is).
Status ReadRates(const json& j, const char* key, std::vector<double>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_array()) return Errorf("node info: '{}' must be an array", key);
  for (const json& e : *it) {
    if (!e.is_number() || !(e.get<double>() > 0) || !std::isfinite(e.get<double>()))
      return Errorf("node info: {} entries must be positive numbers", key);
    out->push_back(e.get<double>());
  }
  return Status::Ok();
}

}  // namespace

double NodeInfo::FlopsFor(DType type) const {
  double slowest = 0;
  for (const auto& [t, f] : matmul_flops) {
    if (t == type) return f;
    if (slowest == 0 || f < slowest) slowest = f;
  }
  return slowest;
}

double NodeInfo::WeightBw(double tokens) const {
  if (weight_bw_batch.empty()) return weight_bw > 0 ? weight_bw : mem_bw;
  return Interpolate(weight_bw_batch, tokens);
}

double NodeInfo::WeightBw(double tokens, DType type) const {
  for (const auto& [t, table] : type_bw_batch)
    if (t == type && !table.empty()) return Interpolate(table, tokens);
  return WeightBw(tokens);
}

NodeInfo CoRunning(const NodeInfo& n) {
  if (n.corun_slowdown.empty()) return n;
  NodeInfo c = n;
  auto slow = [&](double tokens) { return Interpolate(n.corun_slowdown, tokens); };
  for (size_t i = 0; i < c.weight_bw_batch.size(); ++i)
    c.weight_bw_batch[i] /= slow(std::ldexp(1.0, static_cast<int>(i)));
  for (auto& [t, table] : c.type_bw_batch)
    for (size_t i = 0; i < table.size(); ++i)
      table[i] /= slow(std::ldexp(1.0, static_cast<int>(i)));
  c.weight_bw /= slow(1);
  c.mem_bw /= slow(1);
  const double compute = n.corun_slowdown.back();
  for (auto& [t, f] : c.matmul_flops) f /= compute;
  c.attn_flops /= compute;
  c.corun_slowdown.clear();
  return c;
}

Status ValidateNode(const NodeInfo& n) {
  const std::string who = n.name.empty() ? std::string("(unnamed)") : n.name;
  if (n.mem_limit == 0) return Errorf("node {}: no memory limit", who);
  if (!(std::isfinite(n.mem_bw) && n.mem_bw > 0))
    return Errorf("node {}: memory bandwidth must be > 0 (got {})", who, n.mem_bw);
  for (const auto& [t, f] : n.matmul_flops)
    if (!(std::isfinite(f) && f > 0))
      return Errorf("node {}: matmul throughput for {} must be > 0", who, DTypeName(t));
  if (!FiniteNonNegative(n.weight_bw) || !FiniteNonNegative(n.attn_flops))
    return Errorf("node {}: weight bandwidth and attention speed must be finite and >= 0", who);
  for (double b : n.weight_bw_batch)
    if (!(std::isfinite(b) && b > 0))
      return Errorf("node {}: weight_bw_batch entries must be > 0", who);
  for (double f : n.corun_slowdown)
    if (!(std::isfinite(f) && f >= 1))
      return Errorf("node {}: corun_slowdown entries must be >= 1", who);
  for (const auto& [t, table] : n.type_bw_batch)
    for (double b : table)
      if (!(std::isfinite(b) && b > 0))
        return Errorf("node {}: type_bw_batch.{} entries must be > 0", who, DTypeName(t));
  if (!FiniteNonNegative(n.link_bw) || !FiniteNonNegative(n.link_latency_s) ||
      !FiniteNonNegative(n.link_cpu_s_per_byte))
    return Errorf("node {}: link bandwidth, latency and CPU per byte must be finite and >= 0", who);
  if (n.n_threads < 1) return Errorf("node {}: n_threads must be >= 1", who);
  return Status::Ok();
}

std::string NodeInfoToJson(const NodeInfo& n) {
  json flops = json::object();
  for (const auto& [t, f] : n.matmul_flops) flops[std::string(DTypeName(t))] = f;
  json types = json::object();
  for (const auto& [t, table] : n.type_bw_batch) types[std::string(DTypeName(t))] = table;
  json j = {{"name", n.name},
            {"address", n.address},
            {"mem_limit", n.mem_limit},
            {"mem_bw", n.mem_bw},
            {"weight_bw", n.weight_bw},
            {"attn_flops", n.attn_flops},
            {"weight_bw_batch", n.weight_bw_batch},
            {"type_bw_batch", types},
            {"corun_slowdown", n.corun_slowdown},
            {"matmul_flops", flops},
            {"isa", n.isa},
            {"n_threads", n.n_threads},
            {"link_bw", n.link_bw},
            {"link_latency_s", n.link_latency_s},
            {"link_cpu_s_per_byte", n.link_cpu_s_per_byte}};
  // Replacing invalid UTF-8 keeps dump() from throwing on a hostile name.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<NodeInfo> NodeInfoFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Errorf("node info: not valid JSON");
  if (!j.is_object()) return Errorf("node info: expected a JSON object");
  NodeInfo n;
  SHOAL_RETURN_IF_ERROR(ReadString(j, "name", &n.name));
  SHOAL_RETURN_IF_ERROR(ReadString(j, "address", &n.address));
  SHOAL_RETURN_IF_ERROR(ReadString(j, "isa", &n.isa));
  SHOAL_RETURN_IF_ERROR(ReadUint(j, "mem_limit", UINT64_MAX, &n.mem_limit));
  SHOAL_RETURN_IF_ERROR(ReadDouble(j, "mem_bw", &n.mem_bw));
  SHOAL_RETURN_IF_ERROR(ReadDouble(j, "weight_bw", &n.weight_bw));
  SHOAL_RETURN_IF_ERROR(ReadDouble(j, "attn_flops", &n.attn_flops));
  SHOAL_RETURN_IF_ERROR(ReadDouble(j, "link_bw", &n.link_bw));
  SHOAL_RETURN_IF_ERROR(ReadDouble(j, "link_latency_s", &n.link_latency_s));
  SHOAL_RETURN_IF_ERROR(ReadDouble(j, "link_cpu_s_per_byte", &n.link_cpu_s_per_byte));
  uint64_t threads = static_cast<uint64_t>(n.n_threads);
  SHOAL_RETURN_IF_ERROR(ReadUint(j, "n_threads", INT32_MAX, &threads));
  n.n_threads = static_cast<int32_t>(threads);
  SHOAL_RETURN_IF_ERROR(ReadRates(j, "weight_bw_batch", &n.weight_bw_batch));
  SHOAL_RETURN_IF_ERROR(ReadRates(j, "corun_slowdown", &n.corun_slowdown));
  if (auto it = j.find("type_bw_batch"); it != j.end()) {
    if (!it->is_object()) return Errorf("node info: 'type_bw_batch' must be an object");
    for (auto e = it->begin(); e != it->end(); ++e) {
      const std::optional<DType> t = DTypeFromName(e.key());
      if (!t) return Errorf("node info: type_bw_batch: unknown type '{}'", e.key());
      std::vector<double> table;
      SHOAL_RETURN_IF_ERROR(ReadRates(*it, e.key().c_str(), &table));
      n.type_bw_batch.emplace_back(*t, std::move(table));
    }
  }
  if (auto it = j.find("matmul_flops"); it != j.end()) {
    if (!it->is_object()) return Errorf("node info: 'matmul_flops' must be an object");
    for (auto e = it->begin(); e != it->end(); ++e) {
      const std::optional<DType> t = DTypeFromName(e.key());
      if (!t) return Errorf("node info: matmul_flops: unknown type '{}'", e.key());
      if (!e.value().is_number())
        return Errorf("node info: matmul_flops.{} must be a number", e.key());
      n.matmul_flops.emplace_back(*t, e.value().get<double>());
    }
  }
  return n;
}

}  // namespace shoal::measure
