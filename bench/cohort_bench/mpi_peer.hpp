#pragma once

// The MPI peer (--peer mpi): the same sweep through MPI's collectives on MPI_COMM_WORLD, in the
// same processes as cohort. Needs the job started by mpirun; cohort then finds its rank from
// Open MPI's variables. Built only with the 'mpi' feature (COHORT_BENCH_HAVE_MPI).

#include "implementation.hpp"

#include <memory>

namespace cohort::bench {

/// MPI_Init_thread on construction, MPI_Finalize on destruction (errors logged, not thrown).
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

/// MPI on MPI_COMM_WORLD. Throws Error(InvalidUsage) when MPI's rank or size differ from
/// cohort's (the job was not started by one mpirun).
std::unique_ptr<Implementation> make_mpi_peer(int cohort_rank, int cohort_size);

}  // namespace cohort::bench
