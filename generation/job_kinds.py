"""The job kinds of generation/: corpus import, IDF, constraint selection and decoding."""
