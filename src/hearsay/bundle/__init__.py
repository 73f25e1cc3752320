"""`hearsay bundle`: build a bundle (hearsay.bundle.build), choose its training rows
(hearsay.bundle.select) and measure its shortcuts (hearsay.bundle.diagnostics).

The bundle as an artefact (its file names, a clip's path, the tree-sha, `load_bundle`) is
hearsay.contracts.bundle: every stage that reads a bundle imports that module, not this package.
"""
