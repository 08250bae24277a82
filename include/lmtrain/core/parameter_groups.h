// A partition of a model's parameters into the groups that automatic relevance determination
// gives one penalty each (MacKay 1994; Neal 1996): for a network, one group per input feature
// (the first layer's weights leaving input i), every later layer's weights one group, and every
// layer's biases one group (ModelSpec::relevance_groups; lmtrain.torch builds the same from a
// module's parameters).  A large penalty on "input i" means the data do not support using input i.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lmtrain {

struct ParameterGroups {
  std::vector<std::uint32_t> group_of;  // the group of each parameter
  std::vector<std::string> names;  // "input 3", "layer 2 (dense) weights", "layer 0 (dense) bias"
  std::vector<std::size_t> sizes;  // parameters per group (each > 0)
  // Groups [0, input_groups) are the first layer's input features (dense) or channels (conv2d),
  // in order: "input f" is group f.
  std::size_t input_groups = 0;
  std::size_t count() const { return names.size(); }
};

}  // namespace lmtrain
