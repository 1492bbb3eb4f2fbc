"""Quality control: workers' attention, degraded and agreement rules and the figures the admin shows (``workers``),
how a degraded check is made (``degraded``), crowd submissions confirmed with their platform before they count
(``verification``), and split-half reliability (``split_half``)."""
