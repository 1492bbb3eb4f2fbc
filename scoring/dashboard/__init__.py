"""The researcher's dashboard: its views, ParaBank's tables and the plots."""
