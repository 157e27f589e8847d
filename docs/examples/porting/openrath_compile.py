# docs/examples/porting/openrath_compile.py
from openrath_review import ReviewWorkflow

from rho_notebook.flow import use_providers

use_providers({"main": "openai"})  # the providers this process knows: {name: kind}, as in settings

workflow = ReviewWorkflow()
workflow.writer.to(provider="main")  # checked now: an unknown name fails here
workflow.writer.to(model="small")  # overlays the current placement
for module in workflow.modules():  # Workflow.to places direct agents only
    module.to(provider="main")

compiled = workflow.compile()
manifest = compiled.manifest

models = manifest.provider_models()
kinds = manifest.provider_kinds()
problems = compiled.validate()
print(models, kinds, problems)
