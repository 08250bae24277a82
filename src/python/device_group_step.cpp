// lmtrain._core.DeviceGroupStep{32,64}: the torch path's LM step on several devices of this
// process — lmtrain.torch's `devices=[d0, d1, …]`, cuPyLMA's device list.  Rank r is a
// ForeignStep (foreign_step.h) on device r with a linearization of its own model replica and its
// shard of the batch; the ranks are threads of this process and meet in a dist::DeviceGroup, so
// each device's partial A and g are summed (a plain sum of host buffers on CPUs and on a GPU that
// appears twice; NCCL in one process when every device is a GPU of its own), rank 0 solves and
// broadcasts δ, and every replica keeps the same parameters: the step, its decisions and its
// plan are the engine's, exactly as over MPI ranks.
//
// A rank that fails (an allocation, an error of the library) breaks the group: the other ranks
// leave the collective they wait in, the step raises that rank's error, and the group cannot be
// used again (lmtrain.torch builds a new one).  An exception a Python callback raises does not
// break it: the source hands out NaNs (foreign_source.h), the step ends on every rank, and the
// first such exception, in rank order, is raised afterwards.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "errors.h"
#include "foreign_step.h"
#include "lmtrain/dist/device_group.h"
#include "module.h"
#include "python_gc.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

// NCCL sums the device buffers when every rank is a GPU of its own and NCCL loads; otherwise the
// group's host collectives do (NCCL refuses two ranks on one device).
template <typename T>
bool nccl_for(const std::vector<std::unique_ptr<ForeignStep<T>>>& steps) {
  if (!dist::nccl_built() || steps.size() < 2) return false;
  std::set<int> devices;
  for (const auto& s : steps) {
    if (!s->on_cuda()) return false;
    devices.insert(s->device_index());
  }
  return devices.size() == steps.size() && dist::nccl_runtime_description().rfind("NCCL ", 0) == 0;
}

// What an exception says, for the message that stops the other ranks.
std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

template <typename T>
class DeviceGroupStep {
 public:
  using Vector = nb::ndarray<T, nb::ndim<1>, nb::c_contig>;

  // One spec and one linearization object per device, rank r at index r.  The ranks' plans are
  // made together (the planner agrees on the float64 rate, and NCCL's start is collective).
  DeviceGroupStep(const std::vector<ForeignStepSpec>& specs, std::vector<nb::object> callbacks) {
    if (specs.size() < 2 || specs.size() != callbacks.size())
      throw InvalidArgument(fmt::format(
          "a device group needs a spec and a linearization for each of at least 2 devices, not "
          "{} specs and {} linearizations",
          specs.size(), callbacks.size()));
    for (std::size_t r = 0; r < specs.size(); ++r) {
      if (specs[r].parameters != specs[0].parameters)
        throw InvalidArgument(
            fmt::format("device {} holds {} parameters, device 0 {}: every "
                        "device must hold a replica of the same model",
                        r, specs[r].parameters, specs[0].parameters));
      steps_.push_back(std::make_unique<ForeignStep<T>>(specs[r], std::move(callbacks[r])));
    }
    group_ = dist::DeviceGroup::create(static_cast<int>(steps_.size()));
    nccl_ = nccl_for(steps_);
    nb::gil_scoped_release unlocked;
    on_ranks([&](int r) {
      std::unique_ptr<dist::Communicator> comm = group_->member(r);
      if (nccl_)
        comm = dist::make_nccl_communicator(std::move(comm), steps_[at(r)]->device_index());
      steps_[at(r)]->build(std::move(comm));
    });
  }

  DeviceGroupStep(const DeviceGroupStep&) = delete;
  DeviceGroupStep& operator=(const DeviceGroupStep&) = delete;

  // One step: rank r from params[r] (its replica's flat parameters, updated in place when the
  // step is accepted) on units[r] units of the batch its linearization holds.  The reported loss
  // averages over `reported_units` (0: the ranks' units together).  Returns rank 0's report,
  // which every rank's equals in its decisions.
  FrontEndStepReport step(std::vector<Vector> params, const std::vector<std::size_t>& units,
                          std::size_t reported_units) {
    const std::size_t ranks = steps_.size();
    if (params.size() != ranks || units.size() != ranks)
      throw nb::value_error(fmt::format("one parameter vector and one unit count per device ({}), "
                                        "not {} and {}",
                                        ranks, params.size(), units.size())
                                .c_str());
    if (group_->cancelled())
      throw nb::value_error("this device group was stopped by an earlier failure; make a new one");
    std::vector<T*> theta(ranks);
    for (std::size_t r = 0; r < ranks; ++r) theta[r] = steps_[r]->begin_step(params[r]);
    std::vector<StepReport> results(ranks);
    std::vector<PhaseTimes> times(ranks);
    std::exception_ptr failure;
    {
      nb::gil_scoped_release unlocked;
      try {
        on_ranks([&](int r) {
          results[at(r)] = steps_[at(r)]->run(theta[at(r)], units[at(r)], times[at(r)]);
        });
      } catch (...) {
        failure = std::current_exception();
      }
    }
    std::vector<std::optional<nb::python_error>> raised;
    for (auto& s : steps_) raised.push_back(s->end_step());
    if (failure) std::rethrow_exception(failure);
    for (auto& e : raised)
      if (e) throw std::move(*e);
    std::size_t total = 0;
    for (std::size_t u : units) total += u;
    return steps_[0]->report(results[0], times[0], units[0],
                             reported_units > 0 ? reported_units : total);
  }

  void undo_last_step() {
    for (auto& s : steps_) s->undo_last_step();
  }
  StepperState state() const { return steps_[0]->state(); }
  void set_state(const StepperState& state) {
    for (auto& s : steps_) s->set_state(state);
  }
  const ForeignStep<T>& rank(std::size_t r) const { return *steps_.at(r); }
  std::size_t size() const { return steps_.size(); }
  bool nccl() const { return nccl_; }
  bool stopped() const { return group_->cancelled(); }

  template <typename Visit>
  void visit_python(Visit&& visit) const {
    for (const auto& s : steps_) s->visit_python(visit);
  }
  void clear_python() {
    for (auto& s : steps_) s->clear_python();
  }

 private:
  static std::size_t at(int r) { return static_cast<std::size_t>(r); }

  // fn(r) for every rank r, rank 0 on this thread and the others on threads of their own.  The
  // first rank to fail breaks the group, which releases the ranks waiting for it; its exception
  // (not the ones the others then see) is rethrown once every thread has ended.
  void on_ranks(const std::function<void(int)>& fn) {
    const int ranks = group_->size();
    std::vector<std::exception_ptr> errors(at(ranks));
    std::atomic<int> first{-1};
    auto guarded = [&](int r) {
      try {
        fn(r);
      } catch (...) {
        errors[at(r)] = std::current_exception();
        int none = -1;
        first.compare_exchange_strong(none, r);
        group_->cancel(fmt::format("device {} ({}) failed: {}", r, steps_[at(r)]->device(),
                                   describe(errors[at(r)])));
      }
    };
    std::vector<std::thread> threads;
    threads.reserve(at(ranks - 1));
    for (int r = 1; r < ranks; ++r) threads.emplace_back(guarded, r);
    guarded(0);
    for (std::thread& t : threads) t.join();
    if (first.load() >= 0) std::rethrow_exception(errors[at(first.load())]);
  }

  std::vector<std::unique_ptr<ForeignStep<T>>> steps_;
  std::shared_ptr<dist::DeviceGroup> group_;
  bool nccl_ = false;
};

template <typename T>
void bind_group(nb::module_& m, const char* name) {
  using G = DeviceGroupStep<T>;
  nb::class_<G>(m, name, nb::type_slots(python_gc_slots<G>()),
                "The library's LM step over several devices of this process (lmtrain.torch's "
                "devices=[…]): one torch-path rank per device, threads summing A and g.")
      .def(nb::init<const std::vector<ForeignStepSpec>&, std::vector<nb::object>>(),
           nb::arg("specs"), nb::arg("linearizations"))
      .def("step", &G::step, nb::arg("params"), nb::arg("units"), nb::arg("reported_units") = 0,
           "One LM step: params[r] and units[r] of device r; returns device 0's report.")
      .def("undo_last_step", &G::undo_last_step)
      .def("state", &G::state, "The schedule's state (StepperState), every device's.")
      .def("set_state", &G::set_state, nb::arg("state"))
      .def_prop_ro("devices", &G::size)
      .def_prop_ro("nccl", &G::nccl, "True when NCCL sums the devices' A and g.")
      .def_prop_ro("stopped", &G::stopped, "True after a failure broke the group.")
      .def_prop_ro("linear_solver",
                   [](const G& g) { return std::string(to_string(g.rank(0).plan().solver())); })
      .def_prop_ro("linear_solver_reason",
                   [](const G& g) { return in_python_terms(g.rank(0).plan().solver_reason); })
      .def_prop_ro("geodesic_acceleration", [](const G& g) { return g.rank(0).plan().geodesic(); })
      .def_prop_ro("memory_plan",
                   [](const G& g) { return in_python_terms(g.rank(0).plan().memory.describe()); })
      .def_prop_ro("planned_peak_bytes",
                   [](const G& g) { return g.rank(0).plan().memory.peak_bytes; })
      .def_prop_ro("budget_bytes", [](const G& g) { return g.rank(0).plan().memory.budget_bytes; })
      .def_prop_ro("fixed_bytes", [](const G& g) { return g.rank(0).plan().memory.fixed_bytes; })
      .def_prop_ro("bytes_per_unit",
                   [](const G& g) { return g.rank(0).plan().memory.bytes_per_slice_sample; })
      .def_prop_ro("effective_parameters",
                   [](const G& g) { return g.rank(0).effective_parameters(); })
      .def_prop_ro("slice_units", [](const G& g) { return g.rank(0).slice_units(); })
      .def_prop_ro("device",
                   [](const G& g) {
                     std::string all;
                     for (std::size_t r = 0; r < g.size(); ++r)
                       all += (r > 0 ? "; " : "") + g.rank(r).device();
                     return all;
                   })
      .def_prop_ro("communicator", [](const G& g) { return g.rank(0).communicator(); });
}

}  // namespace

void bind_device_group_step(nb::module_& m) {
  bind_group<float>(m, "DeviceGroupStep32");
  bind_group<double>(m, "DeviceGroupStep64");
}

}  // namespace lmtrain::python
