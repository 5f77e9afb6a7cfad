"""Distillation prompts for the SmolLM2 drafter: generic instructions and questions from templates x topics (seeded),
disjoint by construction from the held-out prompts (``wisv/assets/smollm2-drafter/heldout.jsonl``)."""
from __future__ import annotations

import random

TOPICS = ("the moon", "volcanoes", "honey bees", "the printing press", "rainbows", "photosynthesis", "the ocean",
          "electric cars", "chess", "coffee", "the Roman Empire", "recycling", "sleep", "penguins", "the internet",
          "bread baking", "gravity", "earthquakes", "vaccines", "the violin", "deserts", "trains", "music",
          "friendship", "gardening", "clouds", "dinosaurs", "the heart", "solar panels", "libraries", "rivers",
          "mathematics", "birds", "the weather", "computers", "soccer", "time zones", "paper", "salt", "glass",
          "bicycles", "elephants", "the alphabet", "maps", "snow", "tea", "robots", "forests", "money", "the sun",
          "magnets", "mountains", "cheese", "airplanes", "the brain", "whales", "batteries", "writing an email",
          "learning a language", "exercise", "cooking rice", "saving energy", "a job interview", "public speaking")
TEMPLATES = ("Explain {t} in simple terms.", "Write a short paragraph about {t}.", "What is {t}?",
             "Give me three facts about {t}.", "Why is {t} important?", "Describe {t} to a child.",
             "Write a haiku about {t}.", "List some interesting things about {t}.",
             "What are the benefits of {t}?", "Summarize the history of {t} in two sentences.",
             "Tell me a fun fact about {t}.", "How does {t} work?")
QUESTIONS = ("What is 12 plus 7?", "What is the opposite of hot?", "Spell the word 'house' backwards.",
             "What is the past tense of 'run'?", "What color is the sky on a clear day?", "How many days are in a week?",
             "Name a fruit that is yellow.", "What is 9 times 3?", "What is the plural of 'mouse'?",
             "Translate 'thank you' into French.", "Which animal says 'moo'?", "How many legs does a spider have?",
             "What is the first letter of the English alphabet?", "What do bees make?", "What is 100 minus 45?",
             "What is the freezing point of water in Celsius?", "Write the number seven as a digit.",
             "Give a synonym for 'happy'.", "What is the largest planet in our solar system?",
             "Put these words in alphabetical order: pear, apple, mango.")


def distill_prompts(n: int, seed: int) -> list[str]:
    """``n`` distinct prompts (templates x topics, plus short questions), shuffled with ``seed``."""
    pool = sorted({tpl.format(t=t) for tpl in TEMPLATES for t in TOPICS} | set(QUESTIONS))
    random.Random(seed).shuffle(pool)
    return pool[:n]
