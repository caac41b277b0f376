"""Counters of what the torch.compile backend did, for tests and for checking a model really runs on weft."""
import dataclasses


@dataclasses.dataclass
class Stats:
    graphs: int = 0  # FX graphs handed to the backend
    partitions: int = 0  # weft partitions built
    rejected_partitions: int = 0  # partitions weft could not build (run eagerly)
    weft_runs: int = 0  # partition calls that ran on weft
    eager_runs: int = 0  # partition calls that ran their eager code instead
    fallbacks: int = 0  # partition calls weft failed to run (eager ran them; see WeftPartition.forward)

    def reset(self):
        for f in dataclasses.fields(self):
            setattr(self, f.name, 0)


stats = Stats()
