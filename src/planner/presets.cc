// Device and model presets (numbers and their sources: docs/SCALE.md, "Presets").
#include "planner/presets.h"

#include <nlohmann/json.hpp>
#include <optional>

namespace shoal::planner {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// One device: flops for the quantized matmul path (q4_0, q8_0, mxfp4 share the int8 dot
// throughput), F16 and F32.
DevicePreset Device(std::string name, std::string desc, uint64_t mem_total, uint64_t usable,
                    double bw, double flops_q, double flops_f16, double flops_f32, double link_bw,
                    double latency, int threads, double power, double price, double peak) {
  DevicePreset d;
  d.name = name;
  d.description = std::move(desc);
  d.mem_total = mem_total;
  d.node.name = std::move(name);
  d.node.mem_limit = usable;
  d.node.mem_bw = bw;
  d.node.matmul_flops = {{DType::kQ4_0, flops_q},  {DType::kQ8_0, flops_q},
                         {DType::kMXFP4, flops_q}, {DType::kQ4_K, flops_q},
                         {DType::kF16, flops_f16}, {DType::kF32, flops_f32}};
  d.node.n_threads = threads;
  d.node.link_bw = link_bw;
  d.node.link_latency_s = latency;
  d.power_w = power;
  d.price_usd = price;
  d.peak_flops = peak;
  return d;
}

std::vector<DevicePreset> AllDevices() {
  std::vector<DevicePreset> v;
  // PS3 (Cell B.E. at 3.2 GHz): PPE 25.6 + 6 SPEs usable under Linux x 25.6 GFLOPS fp32 =
  // 179.2 GFLOPS; 256 MB XDR at 25.6 GB/s of which ~209 MiB are left to a Linux process (the
  // hypervisor and kernel keep the rest); 1 GbE; ~200 W at the wall (launch CECHA/CECHB, the
  // models that run OtherOS Linux); ~$100 used. Quantized matmuls have no int8 dot product on
  // the SPE: they run at the fp32 rate after unpacking.
  v.push_back(Device("ps3", "Sony PlayStation 3 (Cell B.E., 256 MB XDR, 1 GbE)", 256 * kMiB,
                     209 * kMiB, 25.6e9, 179.2e9, 179.2e9, 179.2e9, 125e6, 100e-6, 7, 200, 100,
                     200e9));
  // DGX Spark (GB10): 128 GB unified LPDDR5x at 273 GB/s; 1 PFLOP FP4 with sparsity, so
  // ~500 TFLOPS dense FP4 and ~125 TFLOPS dense FP16/BF16 (a quarter); ConnectX-7 200 Gb/s
  // = 25 GB/s, ~5 us RDMA hop; 240 W power supply; $3,999 (Founders Edition). Usable: 119 GiB
  // (the OS and CUDA context keep ~9 GiB).
  v.push_back(Device("dgx-spark", "NVIDIA DGX Spark (GB10, 128 GB LPDDR5x, ConnectX-7 200 Gb/s)",
                     128 * 1000000000ull, 119 * kGiB, 273e9, 500e12, 125e12, 31e12, 25e9, 5e-6, 20,
                     240, 3999, 1e15));
  // H100 SXM5: 80 GB HBM3 at 3.35 TB/s, 989 TFLOPS dense BF16, 1,979 dense FP8 (the 4-bit path
  // runs at FP8 rate), 67 FP32; one 400 Gb/s NDR InfiniBand port per GPU (50 GB/s), ~2 us;
  // 700 W; ~$30,000. Usable 76 GiB (CUDA context, NCCL buffers).
  v.push_back(Device("h100-sxm", "NVIDIA H100 SXM5 (80 GB HBM3, NDR 400 Gb/s)", 80 * 1000000000ull,
                     76 * kGiB, 3.35e12, 1979e12, 989e12, 67e12, 50e9, 2e-6, 132, 700, 30000,
                     989e12));
  // H200 SXM: 141 GB HBM3e at 4.8 TB/s, same compute as H100; 700 W; ~$35,000.
  v.push_back(Device("h200-sxm", "NVIDIA H200 SXM (141 GB HBM3e, NDR 400 Gb/s)",
                     141 * 1000000000ull, 135 * kGiB, 4.8e12, 1979e12, 989e12, 67e12, 50e9, 2e-6,
                     132, 700, 35000, 989e12));
  // Raspberry Pi 5 8 GB: LPDDR4X-4267 32-bit = 17 GB/s peak, ~10 GB/s STREAM; 4 x Cortex-A76
  // at 2.4 GHz, 2 x 128-bit FMA = 38.4 GFLOPS fp32 per core (153.6 total), int8 sdot 4x that
  // in theory, ~2x in llama.cpp; 1 GbE; ~12 W under load; $80. Usable 7 GiB.
  v.push_back(Device("rpi5-8g", "Raspberry Pi 5 8 GB (Cortex-A76 x4, 1 GbE)", 8 * kGiB, 7 * kGiB,
                     10e9, 300e9, 150e9, 150e9, 125e6, 100e-6, 4, 12, 80, 153.6e9));
  // Mac Studio M2 Ultra 192 GB: 800 GB/s unified memory; 76-core GPU ~27.2 TFLOPS fp32 (and
  // fp16 at the same rate); 10 GbE; 295 W max; $5,599 base + memory, ~$6,600 at 192 GB.
  // Usable 170 GiB (macOS wires ~75% of memory for the GPU by default; raised by sysctl).
  v.push_back(Device("m2-ultra-192", "Apple Mac Studio M2 Ultra 192 GB (10 GbE)", 192 * kGiB,
                     170 * kGiB, 800e9, 27.2e12, 27.2e12, 27.2e12, 1.25e9, 50e-6, 24, 295, 6600,
                     27.2e12));
  return v;
}

}  // namespace

std::vector<std::string_view> DevicePresetNames() {
  return {"ps3", "dgx-spark", "h100-sxm", "h200-sxm", "rpi5-8g", "m2-ultra-192"};
}

Result<DevicePreset> FindDevicePreset(std::string_view name) {
  for (DevicePreset& d : AllDevices())
    if (d.name == name) return d;
  std::string known;
  for (auto n : DevicePresetNames()) known += (known.empty() ? "" : ", ") + std::string(n);
  return Errorf("unknown device '{}' (presets: {}, local, or a measure::NodeInfo .json file)", name,
                known);
}

std::vector<LinkPreset> LinkPresets() {
  // Line rate / 8; latencies: a kernel TCP hop on 1-25 GbE (~100 / 50 / 20 us), RDMA on
  // ConnectX-7 and NDR InfiniBand (~5 / 2 us), NVLink 4 (900 GB/s per H100, ~1 us).
  return {{"1gbe", 125e6, 100e-6},   {"10gbe", 1.25e9, 50e-6}, {"25gbe", 3.125e9, 20e-6},
          {"100gbe", 12.5e9, 10e-6}, {"cx7-200g", 25e9, 5e-6}, {"ndr-400g", 50e9, 2e-6},
          {"nvlink4", 450e9, 1e-6}};
}

Result<LinkPreset> FindLinkPreset(std::string_view name) {
  std::string known;
  for (const LinkPreset& l : LinkPresets()) {
    if (l.name == name) return l;
    known += (known.empty() ? "" : ", ") + std::string(l.name);
  }
  return Errorf("unknown link '{}' (presets: {})", name, known);
}

Result<DevicePreset> DeviceFromJson(const std::string& json, const std::string& name) {
  SHOAL_ASSIGN_OR_RETURN(measure::NodeInfo n, measure::NodeInfoFromJson(json));
  SHOAL_RETURN_IF_ERROR(measure::ValidateNode(n));
  DevicePreset d;
  d.name = n.name.empty() ? name : n.name;
  d.description = "from " + name;
  d.node = std::move(n);
  d.mem_total = d.node.mem_limit;
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (j.contains("power_w") && j["power_w"].is_number()) d.power_w = j["power_w"].get<double>();
    if (j.contains("price_usd") && j["price_usd"].is_number())
      d.price_usd = j["price_usd"].get<double>();
  }
  for (const auto& [t, f] : d.node.matmul_flops) d.peak_flops = std::max(d.peak_flops, f);
  return d;
}

}  // namespace shoal::planner
