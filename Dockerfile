# Container image for `dra-scheduler run` (see manifests/deployment.yaml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY plugins ./plugins
RUN pip install --no-cache-dir . && useradd --uid 65532 --no-create-home scheduler
USER 65532:65532
ENTRYPOINT ["dra-scheduler"]
CMD ["run"]
