// Priors for a device nobody calibrated, by rule from the calibrated ones.
//
// A device is calibrated when it is a shipped device (hwmodels/devices/)
// with a shipped profile (calibration/profiles/<id>.textproto, embedded;
// hwmodels/calibration_profile.h). For any
// other device, each step-model prior its file leaves out comes from the
// calibrated devices. An efficiency or the GEMM shape constant
// (TransfersAcrossDevices) that some shipped profile fits is the median of
// the values every shipped profile fits for it, over all vendors: the rule
// `servesim validate`'s leave-one-device-out applies and measures, so the
// expected error quoted below is the error of the rule used (a mean over
// one vendor took the T4's Turing-patched GEMM efficiency, 0.20, into
// every NVIDIA device's: 0.41 for an H100, below the 0.63 of the median).
// Any other prior is the mean, over
// the calibrated devices of the same vendor (all calibrated devices when
// its vendor has none), of their calibrated values: the profile's fitted
// value where the profile fits that parameter, else that device's own
// prior. Weight-format kernel efficiencies (quant_kernel_eff.*) come from
// the class's device priors. The per-unit decode-attention bandwidth
// (attn_unit_gbs) is taken only when every device of the class has it (a
// kernel property of the vendor's stack: ROCm's Triton attention), with
// the device's own compute_units as attn_units. Memory-planner overheads
// the file leaves at 0 (non_torch_gib, cuda_graph_gib_per_layer) take the
// class mean too. Nothing here is hand-picked per device.
// Stateless; thread-safe.
#ifndef SERVESIM_HWMODELS_CATALOG_PRIORS_H_
#define SERVESIM_HWMODELS_CATALOG_PRIORS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

struct PriorsByRule {
  servesim::proto::Device device;  // the input with the derived priors filled in
  std::vector<std::string> from;   // calibrated devices the rule averaged, sorted
  std::vector<std::string> keys;   // priors (and device fields) the rule set, sorted
  // Of keys, those set to the median over every shipped profile that fits
  // them, and those profiles' devices, sorted.
  std::vector<std::string> median_keys;
  std::vector<std::string> median_from;
  // One line for stderr and the provenance: the device is uncalibrated,
  // where its priors came from, and its expected error.
  std::string note;
};

// Whether a step parameter learned on some devices is carried to another
// device (in the rule above and in `validate`'s leave-one-device-out): the
// efficiencies (fractions of a datasheet peak: StepParameterTable unit
// "fraction") and the GEMM shape law's constant (gemm_w_half, per compute
// unit: the device's unit count enters the law). Times and counts belong
// to a serving stack or a kernel and stay the device's.
bool TransfersAcrossDevices(std::string_view name);

// Whether `device` is a shipped device (same id and same file content as
// the embedded one) that has a shipped calibration profile.
bool IsCalibratedDevice(const servesim::proto::Device& device);

// Whether `device` is byte-for-byte the embedded file of its id.
bool IsShippedDevice(const servesim::proto::Device& device);

// The rule above applied to an uncalibrated device. Errors only when a
// shipped profile cannot be read.
absl::StatusOr<PriorsByRule> DerivePriorsByRule(const servesim::proto::Device& device);

// Expected error of a prediction on an uncalibrated device whose priors
// come from the calibrated devices `from`: the leave-one-device-out MAPE
// that `servesim validate --refit` stored in their shipped profiles
// (structural_errors, pass leave_one_device_out), per metric family, as
// "throughput 5.6% (l4) to 61.5% (t4); ttft ...; tpot ... (leave-one-device-out
// MAPE of `servesim validate`: each device predicted from the others)". Empty
// when none of them has such an entry.
std::string LeaveOneDeviceOutError(const std::vector<std::string>& from);

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_CATALOG_PRIORS_H_
