// kernels_decode_team.cu — the decoder kernel of the team agent (frames of up to DecodeTeamPolicy::kMaxSrcBytes; it
// reads the frame's dtype and code width on the device), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {

__global__ void __launch_bounds__(DecodeTeamPolicy::kWarps * 32, DecodeTeamPolicy::kMinBlocks)
    decode_team_kernel(const __grid_constant__ DecodeArgs a) {
  decode_frame<TeamAgent>(a);
}
const void* decode_team_kernel_address() { return (const void*)decode_team_kernel; }

}  // namespace cuda
}  // namespace splitzip
